import API
import APNs
import ArgumentParser
import Hummingbird
import Logging
import Settings
import Storage

/// `pushchat-api [serve] [development|production]`: runs the HTTP API until SIGTERM or SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP API (the default command)."
    )

    @OptionGroup var options: ProcessOptions

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-api") {
            let (configuration, logger) = try options.start(process: "api", label: "pushchat-api")
            try await SchemaFitCheck.require(configuration, program: "pushchat-api", logger: logger)
            logger.info(
                "API server starting (\(configuration.mode.rawValue) mode)",
                metadata: ["db.url": "\(configuration.databaseURL)"]
            )
            let app = try APIApplication.build(configuration: configuration, logger: logger)
            try await app.runService()
            logger.info("API server stopped")
        }
    }
}
