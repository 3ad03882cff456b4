// The runner contract (agents/ios/runner_contract/*.schema.json), as Codable types.
// JSON keys are snake_case; `ContractCoding` converts them to and from these camelCase names.
import Foundation

public enum ContractCoding {
    public static let jobSchema = "farm.ios.job/1"
    public static let resultSchema = "farm.ios.result/1"

    public static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
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
public struct TensorFile: Codable, Sendable, Equatable {
    public let name: String
    public let dtype: String  // float32 | float16 | float64 | int32
    public let shape: [Int]
    public let path: String

    public init(name: String, dtype: String, shape: [Int], path: String) {
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.path = path
    }
}

public struct JobFile: Codable, Sendable {
    public struct Model: Codable, Sendable {
        public let path: String
        public let format: String  // mlpackage | mlmodel | mlmodelc
        public let sha256: String
    }

    public struct Thermal: Codable, Sendable {
        public let waitFor: ThermalLevel
        public let deadlineS: Double
    }

    public let schema: String
    public let jobId: String
    public let model: Model
    public let computeUnits: String  // all | cpuAndNeuralEngine | cpuAndGPU | cpuOnly
    public let warmup: Int
    public let runs: Int
    public let profileOps: Bool
    public let thermal: Thermal
    public let inputs: [TensorFile]
    public let resultPath: String
    public let outputsDir: String
}

public struct ResultFile: Codable, Sendable {
    public struct Failure: Codable, Sendable {
        public let kind: String  // job | thermal | compile | load | predict | output
        public let message: String
    }

    public struct Runner: Codable, Sendable {
        public let name: String
        public let version: String
        public let osVersion: String
        public let productType: String
    }

    public struct Timings: Codable, Sendable {
        public let compile: Double
        public let load: Double
        public let firstInference: Double
    }

    public struct ThermalReport: Codable, Sendable {
        public let before: ThermalLevel
        public let after: ThermalLevel
        public let waitedMs: Double
    }

    public struct Memory: Codable, Sendable {
        public let peakFootprintBytes: Int?
    }

    public struct PlannedOp: Codable, Sendable {
        public let name: String
        public let opType: String
        public let preferredDevice: String  // ANE | GPU | CPU
        public let supportedDevices: [String]
        public let estimatedCost: Double?
    }

    public struct ComputePlan: Codable, Sendable {
        public let available: Bool
        public let reason: String?
        public let ops: [PlannedOp]?
    }

    public let schema: String
    public let jobId: String
    public let status: String  // ok | error
    public var error: Failure?
    public let runner: Runner
    public var computeUnits: String?
    public var timingsMs: Timings?
    public var samplesMs: [Double]?
    public var thermal: ThermalReport?
    public var memory: Memory?
    public var outputs: [TensorFile]?
    public var computePlan: ComputePlan?

    public init(jobId: String, runner: Runner, failure: Failure? = nil) {
        schema = ContractCoding.resultSchema
        self.jobId = jobId
        status = failure == nil ? "ok" : "error"
        error = failure
        self.runner = runner
    }
}
