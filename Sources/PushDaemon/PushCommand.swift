import ArgumentParser
import Logging
import NIOSSL
import Push
import ServiceLifecycle
import Shared

/// `pushchat-push [development|production]`: the long-running sender (the tutorial's `push.php`).
@main
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushchat-push",
        abstract: "Send queued notifications to APNs over a kept-open TLS connection, until SIGTERM or SIGINT."
    )

    @OptionGroup var options: ProcessOptions

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-push") {
            let configuration = try options.configuration()
            let logger = try LogSetup.bootstrap(
                label: "pushchat-push",
                level: configuration.logLevel,
                file: configuration.logFilePath(process: "push")
            )
            let tls: NIOSSLContext
            do {
                let identity = try configuration.apns.loadIdentity()
                tls = try GatewayTLS.clientContext(identity: identity, caFile: configuration.apns.caFile)
            } catch let error as CertificateError {
                logger.critical("\(error)")
                ProcessFailure.printError("pushchat-push", error.description)
                throw ExitCode(78)
            }
            let service = PushService(configuration: configuration, tls: tls, logger: logger)
            let group = ServiceGroup(
                configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            )
            try await group.run()
        }
    }
}
