import ArgumentParser
import Foundation
import Logging

/// The arguments every PushChat executable takes: the tutorial's positional mode and `--config`.
public struct ProcessOptions: ParsableArguments, Sendable {
    @Argument(help: "development or production (default: $APPLICATION_ENV, else production)")
    public var mode: Mode?

    @Option(name: .long, help: "Configuration file (default: config/pushchat.json, when present)")
    public var config: String?

    public init() {}

    /// The configuration and a logger writing to standard output and the process's log file
    /// (`log/<process>_<mode>.log` unless configured): what every executable does first.
    public func start(process: String, label: String) throws(ConfigurationError) -> (Configuration, Logger) {
        let configuration = try configuration()
        let logger = try LogSetup.bootstrap(
            label: label,
            level: configuration.logLevel,
            file: configuration.logFilePath(process: process),
            format: configuration.logFormat
        )
        return (configuration, logger)
    }

    /// The resolved configuration; a bad setting throws an error naming its key.
    public func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> Configuration {
        let mode = try Mode.resolve(argument: mode, environment: environment)
        return try Configuration.load(mode: mode, path: config, environment: environment)
    }
}

/// Turns the errors a PushChat executable expects into one clear line on standard error and a non-zero exit,
/// instead of a usage dump or a crash.
public enum ProcessFailure {
    public static func report<T>(program: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as ConfigurationError {
            printError(program, error.description)
            throw ExitCode(78)  // EX_CONFIG
        } catch let error as CertificateError {
            printError(program, error.description)
            throw ExitCode(78)
        } catch let error as DatabaseError {
            printError(program, error.description)
            throw ExitCode(1)
        }
    }

    public static func printError(_ program: String, _ message: String) {
        FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
    }
}
