// Per-op placement from MLComputePlan (iOS 17.4+): the device CoreML prefers for each ML Program
// operation, the devices that could run it, and its estimated share of the model's cost.
import CoreML
import Foundation

@available(iOS 17.4, macOS 14.4, *)
enum ComputePlanReport {
    static func load(compiledModel url: URL, configuration: MLModelConfiguration) async throws -> ResultFile.ComputePlan {
        let plan = try await MLComputePlan.load(contentsOf: url, configuration: configuration)
        guard case let .program(program) = plan.modelStructure else {
            return .init(available: false, reason: "not an ML Program (MLComputePlan reports ops only for ML Programs here)", ops: nil)
        }
        guard let main = program.functions["main"] else {
            return .init(available: false, reason: "the program has no main function", ops: nil)
        }
        var ops: [ResultFile.PlannedOp] = []
        collect(main.block, plan: plan, into: &ops)
        return .init(available: true, reason: nil, ops: ops)
    }

    /// Operations in program order, nested blocks (cond, while) after the op that owns them.
    private static func collect(
        _ block: MLModelStructure.Program.Block, plan: MLComputePlan, into ops: inout [ResultFile.PlannedOp]
    ) {
        for operation in block.operations {
            if let usage = plan.deviceUsage(for: operation) {
                ops.append(
                    .init(
                        name: operation.outputs.first?.name ?? operation.operatorName,
                        opType: operation.operatorName,
                        preferredDevice: deviceName(usage.preferred),
                        supportedDevices: usage.supported.map(deviceName),
                        estimatedCost: plan.estimatedCost(of: operation)?.weight
                    ))
            }
            for nested in operation.blocks {
                collect(nested, plan: plan, into: &ops)
            }
        }
    }

    private static func deviceName(_ device: MLComputeDevice) -> String {
        switch device {
        case .cpu: return "CPU"
        case .gpu: return "GPU"
        case .neuralEngine: return "ANE"
        @unknown default: return "CPU"  // the contract knows three devices; a new kind is reported as CPU
        }
    }
}
