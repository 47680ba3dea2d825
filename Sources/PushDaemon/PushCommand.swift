import ArgumentParser
import Logging
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
            let (configuration, logger) = try options.start(process: "push", label: "pushchat-push")
            let service: PushService
            switch configuration.apns.transport {
            case .binary:
                service = PushService(configuration: configuration, tls: try configuration.apns.clientTLSContext(), logger: logger)
            case .http2:
                let authentication = try configuration.apns.http2Authentication()
                service = PushService(
                    configuration: configuration,
                    tls: try configuration.apns.http2TLSContext(authentication),
                    logger: logger,
                    http2Authentication: authentication
                )
            }
            let group = ServiceGroup(
                configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            )
            try await group.run()
        }
    }
}
