import ArgumentParser
import Feedback
import Foundation
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

    @Option(
        name: .customLong("metrics-file"),
        help: "Also write this run's figures to this file in the Prometheus text format (for a textfile collector)."
    )
    var metricsFile: String?

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-feedback") {
            let (configuration, logger) = try options.start(process: "feedback", label: "pushchat-feedback")
            let job = try FeedbackJob(configuration: configuration, timeout: .milliseconds(Int64(timeout * 1000)), logger: logger)
            let start = ContinuousClock.now
            var report: FeedbackReport?
            defer { writeMetrics(report, since: start, logger: logger) }
            do {
                report = try await job.run()
                logger.info("\(report!)")
            } catch let error as FeedbackError {
                logger.error("\(error)")
                ProcessFailure.printError("pushchat-feedback", error.description)
                throw ExitCode(1)
            }
        }
    }

    private func writeMetrics(_ report: FeedbackReport?, since start: ContinuousClock.Instant, logger: Logger) {
        guard let metricsFile else { return }
        let exposition = FeedbackMetrics.exposition(report: report, duration: start.duration(to: .now), finishedAt: Date())
        do {
            try FeedbackMetrics.write(exposition, to: metricsFile)
        } catch {
            logger.error("Cannot write the metrics file \(metricsFile): \(error)")
        }
    }
}
