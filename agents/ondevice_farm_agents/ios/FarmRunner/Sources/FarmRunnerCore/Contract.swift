// The runner contract (agents/ondevice_farm_agents/ios/runner_contract/*.schema.json), as Codable types.
// Every type spells its JSON keys in an explicit `CodingKeys` enum: the host's tests parse them
// (tests/ios/test_swift_contract.py) and check each against the schemas, since no Mac builds this
// on the host. Keep the keys here and in the schemas in lock-step.
import Foundation

public enum ContractCoding {
    public static let jobSchema = "farm.ios.job/3"
    public static let resultSchema = "farm.ios.result/3"

    public static var decoder: JSONDecoder { JSONDecoder() }

    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

/// `ProcessInfo.ThermalState`, by the names the contract uses; ordered from cool to hot.
public enum ThermalLevel: String, Codable, Sendable, Comparable {
    case nominal, fair, serious, critical

    public init(_ state: ProcessInfo.ThermalState) {
        switch state {
        case .nominal: self = .nominal
        case .fair: self = .fair
        case .serious: self = .serious
        case .critical: self = .critical
        @unknown default: self = .critical
        }
    }

    private var rank: Int { [.nominal, .fair, .serious, .critical].firstIndex(of: self) ?? 3 }

    public static func < (lhs: ThermalLevel, rhs: ThermalLevel) -> Bool { lhs.rank < rhs.rank }
}

/// A tensor stored as raw little-endian C-order bytes at `path` (relative to the app's home).
/// `name` is the model's feature name; `onnxName` the source model's name for the same tensor
/// (the host's I/O name map): the app keys features by `name` and echoes `onnxName` back.
public struct TensorFile: Codable, Sendable, Equatable {
    public let name: String
    public let onnxName: String?
    public let dtype: String  // float32 | float16 | float64 | int32
    public let shape: [Int]
    public let path: String

    enum CodingKeys: String, CodingKey {
        case name
        case onnxName = "onnx_name"
        case dtype
        case shape
        case path
    }

    public init(name: String, onnxName: String?, dtype: String, shape: [Int], path: String) {
        self.name = name
        self.onnxName = onnxName
        self.dtype = dtype
        self.shape = shape
        self.path = path
    }

    /// `onnx_name` is written even when null: the result schema requires the key.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(onnxName, forKey: .onnxName)
        try container.encode(dtype, forKey: .dtype)
        try container.encode(shape, forKey: .shape)
        try container.encode(path, forKey: .path)
    }
}

/// One output of the job's I/O name map: the model's output feature and its ONNX name.
public struct OutputName: Codable, Sendable, Equatable {
    public let name: String
    public let onnxName: String

    enum CodingKeys: String, CodingKey {
        case name
        case onnxName = "onnx_name"
    }
}

public struct JobFile: Codable, Sendable {
    public struct Model: Codable, Sendable {
        public let path: String
        public let format: String  // mlpackage | mlmodel | mlmodelc
        public let sha256: String

        enum CodingKeys: String, CodingKey {
            case path
            case format
            case sha256
        }
    }

    public struct Thermal: Codable, Sendable {
        public let waitFor: ThermalLevel
        public let deadlineS: Double

        enum CodingKeys: String, CodingKey {
            case waitFor = "wait_for"
            case deadlineS = "deadline_s"
        }
    }

    /// After the timed runs, predict back to back for `durationS` (0: none), in windows of `windowS`.
    public struct Sustained: Codable, Sendable {
        public let durationS: Double
        public let windowS: Double

        enum CodingKeys: String, CodingKey {
            case durationS = "duration_s"
            case windowS = "window_s"
        }
    }

    public let schema: String
    public let jobId: String
    public let model: Model
    public let computeUnits: String  // all | cpuAndNeuralEngine | cpuAndGPU | cpuOnly
    public let warmup: Int
    public let runs: Int
    public let profileOps: Bool
    public let minActiveS: Double
    public let thermal: Thermal
    public let sustained: Sustained
    public let inputs: [TensorFile]
    public let outputs: [OutputName]
    public let resultPath: String
    public let outputsDir: String

    enum CodingKeys: String, CodingKey {
        case schema
        case jobId = "job_id"
        case model
        case computeUnits = "compute_units"
        case warmup
        case runs
        case profileOps = "profile_ops"
        case minActiveS = "min_active_s"
        case thermal
        case sustained
        case inputs
        case outputs
        case resultPath = "result_path"
        case outputsDir = "outputs_dir"
    }

    /// The ONNX name of an output feature, from the job's I/O name map (nil: not in it).
    public func onnxName(ofOutput feature: String) -> String? {
        outputs.first { $0.name == feature }?.onnxName
    }
}

public struct ResultFile: Codable, Sendable {
    public struct Failure: Codable, Sendable {
        public let kind: String  // job | thermal | compile | load | predict | output
        public let message: String

        enum CodingKeys: String, CodingKey {
            case kind
            case message
        }
    }

    public struct Runner: Codable, Sendable {
        public let name: String
        public let version: String
        public let osVersion: String
        public let productType: String

        enum CodingKeys: String, CodingKey {
            case name
            case version
            case osVersion = "os_version"
            case productType = "product_type"
        }
    }

    public struct Timings: Codable, Sendable {
        public let compile: Double
        public let load: Double
        /// a second load of the compiled model while the first is still loaded (caches warm)
        public let warmLoad: Double
        public let firstInference: Double

        enum CodingKeys: String, CodingKey {
            case compile
            case load
            case warmLoad = "warm_load"
            case firstInference = "first_inference"
        }
    }

    public struct ThermalReport: Codable, Sendable {
        public let before: ThermalLevel
        public let after: ThermalLevel
        public let waitedMs: Double

        enum CodingKeys: String, CodingKey {
            case before
            case after
            case waitedMs = "waited_ms"
        }
    }

    public struct Memory: Codable, Sendable {
        public let peakFootprintBytes: Int?

        enum CodingKeys: String, CodingKey {
            case peakFootprintBytes = "peak_footprint_bytes"
        }
    }

    public struct PlannedOp: Codable, Sendable {
        public let name: String
        public let opType: String
        public let preferredDevice: String  // ANE | GPU | CPU
        public let supportedDevices: [String]
        public let estimatedCost: Double?

        enum CodingKeys: String, CodingKey {
            case name
            case opType = "op_type"
            case preferredDevice = "preferred_device"
            case supportedDevices = "supported_devices"
            case estimatedCost = "estimated_cost"
        }
    }

    /// The phone's wall clock (seconds since 1970) at the edges of the timed runs and of the
    /// sustained phase: the host lines its battery samples up with them.
    public struct Spans: Codable, Sendable {
        public let timed: [Double]
        public let active: [Double]
        public var sustained: [Double]?

        enum CodingKeys: String, CodingKey {
            case timed
            case active
            case sustained
        }
    }

    /// What the app can read about the phone at a window's edge: `ProcessInfo.thermalState`.
    public struct SustainedTelemetry: Codable, Sendable {
        public let thermalState: ThermalLevel?

        enum CodingKeys: String, CodingKey {
            case thermalState = "thermal_state"
        }
    }

    public struct SustainedWindow: Codable, Sendable {
        public let startS: Double
        public let endS: Double
        public let samplesMs: [Double]
        public let telemetry: SustainedTelemetry

        enum CodingKeys: String, CodingKey {
            case startS = "start_s"
            case endS = "end_s"
            case samplesMs = "samples_ms"
            case telemetry
        }
    }

    public struct Sustained: Codable, Sendable {
        public let durationS: Double
        public let windowS: Double
        public let start: SustainedTelemetry
        public let windows: [SustainedWindow]
        public let unavailable: [String]

        enum CodingKeys: String, CodingKey {
            case durationS = "duration_s"
            case windowS = "window_s"
            case start
            case windows
            case unavailable
        }
    }

    public struct ComputePlan: Codable, Sendable {
        public let available: Bool
        public let reason: String?
        public let ops: [PlannedOp]?

        enum CodingKeys: String, CodingKey {
            case available
            case reason
            case ops
        }
    }

    public let schema: String
    public let jobId: String
    public let status: String  // ok | error
    public var error: Failure?
    public let runner: Runner
    public var computeUnits: String?
    public var timingsMs: Timings?
    public var samplesMs: [Double]?
    public var spansUnixS: Spans?
    public var activeInferences: Int?
    public var sustained: Sustained?
    public var thermal: ThermalReport?
    public var memory: Memory?
    public var outputs: [TensorFile]?
    public var computePlan: ComputePlan?

    enum CodingKeys: String, CodingKey {
        case schema
        case jobId = "job_id"
        case status
        case error
        case runner
        case computeUnits = "compute_units"
        case timingsMs = "timings_ms"
        case samplesMs = "samples_ms"
        case spansUnixS = "spans_unix_s"
        case activeInferences = "active_inferences"
        case sustained
        case thermal
        case memory
        case outputs
        case computePlan = "compute_plan"
    }

    public init(jobId: String, runner: Runner, failure: Failure? = nil) {
        schema = ContractCoding.resultSchema
        self.jobId = jobId
        status = failure == nil ? "ok" : "error"
        error = failure
        self.runner = runner
    }
}
