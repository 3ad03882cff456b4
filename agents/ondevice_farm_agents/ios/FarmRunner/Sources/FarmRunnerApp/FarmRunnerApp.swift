// The app: launched by the farm host with `--farm-job <path>` (relative to the app's home),
// it runs that job once and shows what it did. The host ends the app after pulling the result.
import FarmRunnerCore
import SwiftUI
import UIKit

@main
struct FarmRunnerApp: App {
    @State private var status = "waiting for a job (launch with --farm-job <path>)"

    var body: some Scene {
        WindowGroup {
            Text(status)
                .font(.system(.body, design: .monospaced))
                .padding()
                .task { await runJobFromArguments() }
        }
    }

    @MainActor
    private func runJobFromArguments() async {
        let arguments = ProcessInfo.processInfo.arguments
        guard let flag = arguments.firstIndex(of: "--farm-job"), flag + 1 < arguments.count else { return }
        let jobPath = arguments[flag + 1]
        UIApplication.shared.isIdleTimerDisabled = true  // a locked screen would suspend the job
        status = "running \(jobPath)"
        let home = URL(fileURLWithPath: NSHomeDirectory())
        let outcome = await Task.detached(priority: .userInitiated) {
            await Runner.run(jobPath: jobPath, home: home)
        }.value
        status = "\(jobPath): \(outcome)"
    }
}
