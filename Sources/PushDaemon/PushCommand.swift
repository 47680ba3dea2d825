import ArgumentParser
import Logging
import Push
import ServiceLifecycle
import Settings
import Storage
import UnixSignals

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
            try await SchemaFitCheck.require(configuration, program: "pushchat-push", logger: logger)
            let services = try PushService.services(configuration: configuration, logger: logger)
            var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            // Whatever the database does, the daemon is gone well within systemd's TimeoutStopSec: what it could not
            // record returns to the queue when its leases run out.
            group.maximumGracefulShutdownDuration = .seconds(12)
            group.maximumCancellationDuration = .seconds(2)
            try await ServiceGroup(configuration: group).run()
        }
    }
}
