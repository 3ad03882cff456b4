// swift-tools-version:5.9
// FarmRunnerCore: the runner contract and the CoreML measurement, shared by the app
// (project.yml) and its tests (`swift test` on a Mac checks the contract files).
import PackageDescription

let package = Package(
    name: "FarmRunner",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [.library(name: "FarmRunnerCore", targets: ["FarmRunnerCore"])],
    targets: [
        .target(name: "FarmRunnerCore", path: "Sources/FarmRunnerCore"),
        // The tests read ../runner_contract through #filePath: SwiftPM keeps resources inside a target.
        .testTarget(name: "FarmRunnerCoreTests", dependencies: ["FarmRunnerCore"], path: "Tests/FarmRunnerCoreTests"),
    ]
)
