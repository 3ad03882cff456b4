// The sustained phase: predictions back to back for the job's duration, cut into windows, each
// with its latencies and ProcessInfo.thermalState at its end. The windows are cut as the host
// runner cuts them (agents/ondevice_farm_agents/host/sustained.py), so farm/ondevice_farm/analysis/sustained.py summarises all alike.
import Foundation

enum SustainedPhase {
    /// iOS shows apps their thermal state, not CPU frequencies or temperatures.
    static let unavailable = ["CPU frequencies and temperatures (iOS does not expose them to apps)"]

    static func run(durationS: Double, windowS: Double, predict: () throws -> Void) throws -> ResultFile.Sustained {
        let clock = ContinuousClock()
        let start = ResultFile.SustainedTelemetry(thermalState: Device.thermal)
        var windows: [ResultFile.SustainedWindow] = []
        let begin = clock.now
        let end = begin + .seconds(durationS)
        var windowStart = begin
        var windowEnd = begin + .seconds(windowS)
        var samples: [Double] = []
        while clock.now < end {
            let before = clock.now
            try predict()
            let after = clock.now
            samples.append((after - before).milliseconds)
            if after >= windowEnd || after >= end {
                windows.append(
                    .init(
                        startS: (windowStart - begin).milliseconds / 1_000,
                        endS: (after - begin).milliseconds / 1_000,
                        samplesMs: samples,
                        telemetry: .init(thermalState: Device.thermal)))
                windowStart = after
                windowEnd = after + .seconds(windowS)
                samples = []
            }
        }
        return .init(durationS: durationS, windowS: windowS, start: start, windows: windows, unavailable: unavailable)
    }
}
