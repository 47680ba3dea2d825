import Foundation
import Testing

/// Development certificates made by `deploy/dev-certs.sh`, once per test process.
enum TestCertificates {
    static let passphrase = "test-passphrase"

    /// The folder holding ca.pem, server.pem, ck.pem, … (see deploy/dev-certs.sh).
    static let directory: String = {
        let directory = NSTemporaryDirectory() + "pushchat-test-certs-\(getpid())"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [TestDatabase.repositoryRoot.appendingPathComponent("deploy/dev-certs.sh").path, directory]
        process.environment = ProcessInfo.processInfo.environment.merging(["PUSHCHAT_DEV_PASSPHRASE": passphrase]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            Issue.record("cannot run deploy/dev-certs.sh: \(error)")
        }
        if process.terminationStatus != 0 { Issue.record("deploy/dev-certs.sh failed with status \(process.terminationStatus)") }
        // The executables run as the service user: keys and certificates 0640 root:<its group>, as the guide says.
        ServiceUser.shareWithGroup(directory, mode: 0o750)
        for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            ServiceUser.shareWithGroup(directory + "/" + file)
        }
        return directory
    }()

    static func path(_ name: String) -> String { directory + "/" + name }
}
