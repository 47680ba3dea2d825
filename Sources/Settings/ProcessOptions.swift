package import ArgumentParser
import Foundation
package import Logging
import Observability
package import Support

/// The arguments every PushChat executable takes: the tutorial's positional mode and `--config`.
package struct ProcessOptions: ParsableArguments, Sendable {
    @Argument(help: "development or production (default: $APPLICATION_ENV, else production)")
    package var mode: Mode?

    @Option(name: .long, help: "Configuration file (default: config/pushchat.json, when present)")
    package var config: String?

    package init() {}

    /// The configuration and a logger writing to standard output and the process's log file
    /// (`log/<process>_<mode>.log` unless configured): what every executable does first.
    package func start(process: String, label: String) throws(ConfigurationError) -> (Configuration, Logger) {
        let configuration = try configuration()
        let logger = try LogSetup.bootstrap(
            label: label,
            level: configuration.logLevel,
            file: configuration.logFilePath(process: process),
            format: configuration.logFormat
        )
        if configuration.mode == .production {
            for url in [configuration.databaseURL] + (configuration.databaseListenURL.map { [$0] } ?? []) {
                if let weakness = url.tlsWeakness { logger.warning("\(url): \(weakness)") }
            }
        }
        return (configuration, logger)
    }

    /// The resolved configuration; a bad setting throws an error naming its key.
    package func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> Configuration {
        let mode = try Mode.resolve(argument: mode, environment: environment)
        return try Configuration.load(mode: mode, path: config, environment: environment)
    }
}
