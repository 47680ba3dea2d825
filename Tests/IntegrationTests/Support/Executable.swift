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

extension Executable {
    /// Runs a tool from the PATH (curl, python3) as the test's own user, `input` on its standard input: its output;
    /// a non-zero exit throws with what it wrote to standard error.
    static func runTool(_ arguments: [String], input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        let standardInput = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = standardInput
        try process.run()
        if let input { standardInput.fileHandleForWriting.write(Data(input.utf8)) }
        try standardInput.fileHandleForWriting.close()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ToolFailure(
                description: "\(arguments.first ?? "?") exited \(process.terminationStatus): \(String(decoding: errorData, as: UTF8.self))"
            )
        }
        return String(decoding: outputData, as: UTF8.self)
    }

    struct ToolFailure: Error, CustomStringConvertible {
        let description: String
    }
}
