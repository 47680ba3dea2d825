import ArgumentParser
import Feedback
import Logging
import Shared

/// `pushchat-feedback [development|production]`: the cron-run pruning job (the tutorial's `feedback.php`).
@main
struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushchat-feedback",
        abstract: "Read APNs' feedback service and delete the users whose device tokens expired; exits when done."
    )

    @OptionGroup var options: ProcessOptions

    @Option(help: "Seconds the feedback service may take before the run gives up.")
    var timeout: Double = 60

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-feedback") {
            let (configuration, logger) = try options.start(process: "feedback", label: "pushchat-feedback")
            let tls = try configuration.apns.clientTLSContext()
            let job = FeedbackJob(configuration: configuration, tls: tls, timeout: .milliseconds(Int64(timeout * 1000)), logger: logger)
            do {
                let report = try await job.run()
                logger.info("\(report)")
            } catch let error as FeedbackError {
                logger.error("\(error)")
                ProcessFailure.printError("pushchat-feedback", error.description)
                throw ExitCode(1)
            }
        }
    }
}
