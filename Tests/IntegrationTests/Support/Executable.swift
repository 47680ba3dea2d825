import Foundation

/// Runs one of the package's built executables (they sit next to the test bundle) as the service user (see
/// ``ServiceUser``) and captures its output.
struct Executable {
    struct Result {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    let name: String

    static var buildDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    var url: URL {
        var directory = Self.buildDirectory
        // swift-testing may run from inside the .xctest bundle folder.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path) && directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent(name)
    }

    /// A process for this executable, not yet started: the environment is the test's without its `PUSHCHAT_*`
    /// settings, plus `environment`.
    func process(_ arguments: [String], environment: [String: String] = [:], currentDirectory: URL? = nil) -> Process {
        let process = Process()
        let (executable, fullArguments) = ServiceUser.command(url, arguments)
        process.executableURL = executable
        process.arguments = fullArguments
        var merged = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHCHAT_") && $0.key != "APPLICATION_ENV" }
        merged.merge(environment) { $1 }
        process.environment = merged
        process.currentDirectoryURL = currentDirectory ?? FileManager.default.temporaryDirectory
        return process
    }

    func run(_ arguments: [String], environment: [String: String] = [:], currentDirectory: URL? = nil) throws -> Result {
        let process = process(arguments, environment: environment, currentDirectory: currentDirectory)
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData, as: UTF8.self)
        )
    }
}
