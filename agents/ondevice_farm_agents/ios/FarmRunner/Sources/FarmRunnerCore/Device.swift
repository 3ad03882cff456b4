// What the app can tell about the phone it runs on: thermal state, memory footprint, model name.
import Foundation

enum Device {
    static var thermal: ThermalLevel { ThermalLevel(ProcessInfo.processInfo.thermalState) }

    /// Waits until the thermal state is `level` or cooler; nil when `deadline` passed first.
    static func waitForThermal(_ level: ThermalLevel, deadlineS: Double) async -> (ThermalLevel, Double)? {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            let state = thermal
            let waited = (clock.now - start).milliseconds
            if state <= level { return (state, waited) }
            if waited >= deadlineS * 1000 { return nil }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// The process's peak physical footprint (what jetsam counts), from task_vm_info.
    static var peakFootprintBytes: Int? {
        var info = task_vm_info_data_t()
        var count = mach_msg_type_number_t(MemoryLayout<task_vm_info_data_t>.size / MemoryLayout<natural_t>.size)
        let result = withUnsafeMutablePointer(to: &info) {
            $0.withMemoryRebound(to: integer_t.self, capacity: Int(count)) {
                task_info(mach_task_self_, task_flavor_t(TASK_VM_INFO), $0, &count)
            }
        }
        return result == KERN_SUCCESS ? Int(info.ledger_phys_footprint_peak) : nil
    }

    /// `iPhone15,4` and the like (`hw.machine`).
    static var productType: String {
        var size = 0
        sysctlbyname("hw.machine", nil, &size, nil, 0)
        var machine = [CChar](repeating: 0, count: size)
        sysctlbyname("hw.machine", &machine, &size, nil, 0)
        return String(cString: machine)
    }

    static var osVersion: String {
        let v = ProcessInfo.processInfo.operatingSystemVersion
        return "\(v.majorVersion).\(v.minorVersion).\(v.patchVersion)"
    }
}

extension Duration {
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}
