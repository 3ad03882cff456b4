// One job: wait for a cool phone, compile, load (and load again, caches warm), time the predictions,
// run the sustained phase the job asks for, ask MLComputePlan where each op runs, write the outputs
// and then, last and atomically, the result file.
import CoreML
import Foundation

public struct Runner {
    public static let name = "FarmRunner"
    public static let version = "0.3.0"

    let home: URL
    let job: JobFile

    public init(home: URL, job: JobFile) {
        self.home = home
        self.job = job
    }

    /// Reads `<home>/<jobPath>`, runs it, writes its result file; returns the result's status.
    public static func run(jobPath: String, home: URL) async -> String {
        let runner = ResultFile.Runner(
            name: name, version: version, osVersion: Device.osVersion, productType: Device.productType)
        let job: JobFile
        do {
            job = try ContractCoding.decoder.decode(JobFile.self, from: Data(contentsOf: home.appending(path: jobPath)))
        } catch {
            return "cannot read \(jobPath): \(error)"  // no result path to answer on: the host times out
        }
        var result: ResultFile
        do {
            result = try await Runner(home: home, job: job).measure(runner)
        } catch let failure as Failure {
            result = ResultFile(jobId: job.jobId, runner: runner, failure: .init(kind: failure.kind, message: failure.message))
        } catch {
            result = ResultFile(jobId: job.jobId, runner: runner, failure: .init(kind: "predict", message: "\(error)"))
        }
        do {
            let data = try ContractCoding.encoder.encode(result)
            try data.write(to: home.appending(path: job.resultPath), options: .atomic)
        } catch {
            return "cannot write the result: \(error)"
        }
        return result.status
    }

    struct Failure: Error {
        let kind: String
        let message: String
    }

    func measure(_ runner: ResultFile.Runner) async throws -> ResultFile {
        guard job.schema == ContractCoding.jobSchema else {
            throw Failure(kind: "job", message: "job schema \(job.schema), this app reads \(ContractCoding.jobSchema)")
        }
        guard let cooled = await Device.waitForThermal(job.thermal.waitFor, deadlineS: job.thermal.deadlineS) else {
            throw Failure(kind: "thermal", message: "still \(Device.thermal.rawValue) after \(job.thermal.deadlineS) s")
        }
        let (before, waitedMs) = cooled
        let clock = ContinuousClock()
        let modelURL = home.appending(path: job.model.path)

        var compiledURL = modelURL
        var compileMs = 0.0
        if job.model.format != "mlmodelc" {
            let start = clock.now
            do { compiledURL = try await MLModel.compileModel(at: modelURL) } catch {
                throw Failure(kind: "compile", message: "\(error)")
            }
            compileMs = (clock.now - start).milliseconds
        }
        defer { if compiledURL != modelURL { try? FileManager.default.removeItem(at: compiledURL) } }

        let configuration = MLModelConfiguration()
        configuration.computeUnits = try computeUnits()
        var start = clock.now
        let model: MLModel
        do { model = try MLModel(contentsOf: compiledURL, configuration: configuration) } catch {
            throw Failure(kind: "load", message: "\(error)")
        }
        let loadMs = (clock.now - start).milliseconds
        // The warm load: the same compiled model again while the first is loaded, so what CoreML
        // caches per model (the ANE's compiled program, the GPU's pipelines) is already there.
        start = clock.now
        do { _ = try MLModel(contentsOf: compiledURL, configuration: configuration) } catch {
            throw Failure(kind: "load", message: "second load: \(error)")
        }
        let warmLoadMs = (clock.now - start).milliseconds

        let features: MLFeatureProvider
        do { features = try Tensors.features(job.inputs, home: home, model: model.modelDescription) } catch {
            throw Failure(kind: "job", message: "inputs: \(error)")
        }
        let first: MLFeatureProvider
        var samples: [Double] = []
        do {
            start = clock.now
            first = try model.prediction(from: features)
            let firstMs = (clock.now - start).milliseconds
            for _ in 0..<job.warmup { _ = try model.prediction(from: features) }
            samples.reserveCapacity(job.runs)
            let timedStart = Date().timeIntervalSince1970
            for _ in 0..<job.runs {
                start = clock.now
                _ = try model.prediction(from: features)
                samples.append((clock.now - start).milliseconds)
            }
            let timedEnd = Date().timeIntervalSince1970
            // a loaded window long enough for the host to sample the battery over (its gauge
            // updates about once a second): untimed predictions after the timed ones
            var activeInferences = job.runs
            while Date().timeIntervalSince1970 - timedStart < job.minActiveS {
                _ = try model.prediction(from: features)
                activeInferences += 1
            }
            var spans = ResultFile.Spans(timed: [timedStart, timedEnd], active: [timedStart, Date().timeIntervalSince1970])
            var sustained: ResultFile.Sustained?
            if job.sustained.durationS > 0 {
                let sustainedStart = Date().timeIntervalSince1970
                sustained = try SustainedPhase.run(durationS: job.sustained.durationS, windowS: job.sustained.windowS) {
                    _ = try model.prediction(from: features)
                }
                spans.sustained = [sustainedStart, Date().timeIntervalSince1970]
            }
            var result = ResultFile(jobId: job.jobId, runner: runner)
            result.timingsMs = .init(compile: compileMs, load: loadMs, warmLoad: warmLoadMs, firstInference: firstMs)
            result.samplesMs = samples
            result.spansUnixS = spans
            result.activeInferences = activeInferences
            result.sustained = sustained
            result.computeUnits = job.computeUnits
            result.outputs = try writeOutputs(first, of: model)
            result.computePlan = await computePlan(compiledURL, configuration)
            result.thermal = .init(before: before, after: Device.thermal, waitedMs: waitedMs)
            result.memory = .init(peakFootprintBytes: Device.peakFootprintBytes)
            return result
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(kind: "predict", message: "\(error)")
        }
    }

    private func computeUnits() throws -> MLComputeUnits {
        switch job.computeUnits {
        case "all": return .all
        case "cpuAndNeuralEngine": return .cpuAndNeuralEngine
        case "cpuAndGPU": return .cpuAndGPU
        case "cpuOnly": return .cpuOnly
        default: throw Failure(kind: "job", message: "unknown compute units \(job.computeUnits)")
        }
    }

    private func writeOutputs(_ prediction: MLFeatureProvider, of model: MLModel) throws -> [TensorFile] {
        let directory = home.appending(path: job.outputsDir)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let names = model.modelDescription.outputDescriptionsByName.keys.sorted()
            return try names.enumerated().map { index, name in
                let path = "\(job.outputsDir)/\(index).bin"
                // the feature's name as the model has it, and its ONNX name from the job's I/O map
                return try Tensors.write(
                    prediction.featureValue(for: name), name: name, onnxName: job.onnxName(ofOutput: name),
                    to: home.appending(path: path), path: path)
            }
        } catch {
            throw Failure(kind: "output", message: "\(error)")
        }
    }

    private func computePlan(_ compiledURL: URL, _ configuration: MLModelConfiguration) async -> ResultFile.ComputePlan {
        guard job.profileOps else { return .init(available: false, reason: "profile_ops was false", ops: nil) }
        guard #available(iOS 17.4, macOS 14.4, *) else {
            return .init(available: false, reason: "MLComputePlan needs iOS 17.4", ops: nil)
        }
        do {
            return try await ComputePlanReport.load(compiledModel: compiledURL, configuration: configuration)
        } catch {
            return .init(available: false, reason: "MLComputePlan failed: \(error)", ops: nil)
        }
    }
}
