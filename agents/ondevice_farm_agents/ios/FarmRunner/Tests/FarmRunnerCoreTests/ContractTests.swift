// The Swift types read and write the documented contract examples (agents/ondevice_farm_agents/ios/runner_contract/).
import FarmRunnerCore
import Foundation
import XCTest

final class ContractTests: XCTestCase {
    private let contract = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appending(path: "runner_contract")

    func testTheExampleJobDecodes() throws {
        let job = try ContractCoding.decoder.decode(
            JobFile.self, from: Data(contentsOf: contract.appending(path: "example-job.json")))
        XCTAssertEqual(job.schema, ContractCoding.jobSchema)
        XCTAssertEqual(job.computeUnits, "cpuAndNeuralEngine")
        XCTAssertEqual(job.thermal.waitFor, .nominal)
        XCTAssertEqual(job.inputs.first?.shape, [1, 3, 224, 224])
        XCTAssertEqual(job.inputs.first?.name, "input_1")
        XCTAssertEqual(job.inputs.first?.onnxName, "input.1")
        XCTAssertEqual(job.onnxName(ofOutput: "t_495"), "495")
        XCTAssertEqual(job.sustained.durationS, 15)
        XCTAssertEqual(job.sustained.windowS, 5)
    }

    func testAnOutputOutsideTheMapIsWrittenWithANullOnnxName() throws {
        let tensor = TensorFile(name: "extra", onnxName: nil, dtype: "float32", shape: [1], path: "a/0.bin")
        let object = try JSONSerialization.jsonObject(with: ContractCoding.encoder.encode(tensor)) as? [String: Any]
        XCTAssertTrue(object?["onnx_name"] is NSNull)
    }

    func testTheExampleResultRoundTripsWithItsKeys() throws {
        let data = try Data(contentsOf: contract.appending(path: "example-result.json"))
        let result = try ContractCoding.decoder.decode(ResultFile.self, from: data)
        let again = try JSONSerialization.jsonObject(with: ContractCoding.encoder.encode(result)) as? [String: Any]
        let original = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        XCTAssertEqual(again.map { Set($0.keys) }, original.map { Set($0.keys) })
        XCTAssertEqual(result.computePlan?.ops?.first?.preferredDevice, "CPU")
        XCTAssertEqual(result.timingsMs?.firstInference, 7.9)
        XCTAssertEqual(result.outputs?.first?.onnxName, "495")
        XCTAssertEqual(result.timingsMs?.warmLoad, 21.4)
        XCTAssertEqual(result.sustained?.windows.last?.telemetry.thermalState, .serious)
        XCTAssertEqual(result.spansUnixS?.timed.count, 2)
    }

    func testThermalLevelsAreOrderedCoolToHot() {
        XCTAssertLessThan(ThermalLevel.nominal, ThermalLevel.fair)
        XCTAssertLessThan(ThermalLevel.serious, ThermalLevel.critical)
    }
}
