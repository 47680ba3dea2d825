import ArgumentParser
import Feedback
import Foundation
import Logging
import Observability
import Settings
import Storage
import Support

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

    @Flag(help: "Delete the reported users even when they are more than feedback_max_prune allows.")
    var force = false

    @Option(
        name: .customLong("metrics-file"),
        help: "Also write this run's figures to this file in the Prometheus text format (for a textfile collector)."
    )
    var metricsFile: String?

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-feedback") {
            let (configuration, logger) = try options.start(process: "feedback", label: "pushchat-feedback")
            try await SchemaFitCheck.require(configuration, program: "pushchat-feedback", logger: logger)
            let job = try FeedbackJob(
                configuration: configuration,
                timeout: .milliseconds(Int64(timeout * 1000)),
                force: force,
                logger: logger
            )
            let start = ContinuousClock.now
            var report: FeedbackReport?
            do {
                // One run at a time across every machine that schedules the job.
                let ran = try await JobLock.withLock(
                    "pushchat-feedback",
                    url: configuration.databaseURL,
                    applicationName: "pushchat-feedback",
                    logger: logger
                ) { try await job.run() }
                guard let ran else {
                    logger.info("Another pushchat-feedback run holds the job lock: nothing to do")
                    print("pushchat-feedback: another run holds the job lock (on this or another machine): nothing to do")
                    return
                }
                report = ran
                logger.info("\(ran)")
            } catch let error as FeedbackError {
                logger.error("\(error)")
                ProcessFailure.printError("pushchat-feedback", error.description)
            } catch {
                _ = writeMetrics(nil, since: start, logger: logger)
                throw error
            }
            // Written after a failed run too (success 0), so the alert on it fires; a file that cannot be written
            // fails the run: otherwise no alert could ever notice that the figures stopped.
            let metricsWritten = writeMetrics(report, since: start, logger: logger)
            if report == nil || !metricsWritten { throw ExitCode(1) }
        }
    }

    /// Writes the figures when `--metrics-file` was given; false when the file could not be written.
    private func writeMetrics(_ report: FeedbackReport?, since start: ContinuousClock.Instant, logger: Logger) -> Bool {
        guard let metricsFile else { return true }
        let exposition = FeedbackMetrics.exposition(report: report, duration: start.duration(to: .now), finishedAt: Date())
        do {
            try TextfileMetrics.write(exposition, to: metricsFile)
            return true
        } catch {
            let message = "cannot write the metrics file \(metricsFile): \(error.localizedDescription)"
            logger.error("\(message)")
            ProcessFailure.printError("pushchat-feedback", message)
            return false
        }
    }
}
