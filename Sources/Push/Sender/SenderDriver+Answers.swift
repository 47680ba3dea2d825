import APNs
import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers
import Settings
import Storage
import Support

/// A row with its request, ready to write.
struct Prepared<Request: Sendable>: Sendable {
    let row: QueuedNotification
    let request: Request
}

extension SenderDriver {
    // MARK: Before writing

    /// The requests for `batch`: rows past their expiry fail as `expired`, rows the destination can never send fail as
    /// `invalid`, rows it cannot send now go back to the queue (`unavailable`: the credentials cannot be made now).
    func prepare(_ batch: [QueuedNotification]) -> (requests: [Prepared<D.Request>], unavailable: Bool) {
        let now = Date()
        var prepared: [Prepared<D.Request>] = []
        prepared.reserveCapacity(batch.count)
        var notNow: [QueuedNotification] = []
        var notNowReason = ""
        // Copied only when a row has expired (a copy of a row retains it: the binary drain's hot path).
        let expiry = settings.expirySeconds
        let live = batch.contains { $0.isExpired(defaultExpiry: expiry, now: now) } ? batch.filter { !failIfExpired($0, now: now) } : batch
        let encoded = encodings(live, now: now)
        for index in live.indices {
            let row = live[index]
            switch encoded[index] {
            case .request(let request):
                if logger.logLevel <= .debug {
                    logger.debug(
                        "Sending message \(row.messageID) to \(row.deviceToken)",
                        metadata: ["push.message_id": "\(row.messageID)"]
                    )
                }
                prepared.append(Prepared(row: row, request: request))
            case .invalid(let reason):
                logger.warning("Message \(row.messageID) can never be sent: \(reason)", metadata: ["push.message_id": "\(row.messageID)"])
                outcomes.failed(row, status: "invalid", reason: reason, kind: "unencodable")
            case .notNow(let reason):
                notNow.append(row)
                notNowReason = reason
            }
        }
        if !notNow.isEmpty {
            logger.critical("\(notNowReason); notifications stay queued")
            outcomes.released(notNow)
        }
        return (prepared, !notNow.isEmpty)
    }

    /// Each row's encoding, in order: on this thread, or (a destination whose encoding is expensive, a batch of 32
    /// rows or more) spread over the machine's cores, so that encrypting for browsers is not one core's work while the
    /// others wait.
    func encodings(_ rows: [QueuedNotification], now: Date) -> [Encoding<D.Request>] {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard destination.encodesInParallel, rows.count >= 32, cores > 1 else { return rows.map { destination.encode($0, now: now) } }
        let encoder = destination
        return ParallelEncoding.map(rows, chunks: min(cores, rows.count / 16)) { encoder.encode($0, now: now) }
    }

    /// Fails a row past its expiry as `expired` instead of sending it (again): it would not be delivered any more.
    /// Returns whether it did.
    func failIfExpired(_ row: QueuedNotification, now: Date) -> Bool {
        guard row.isExpired(defaultExpiry: settings.expirySeconds, now: now) else { return false }
        logger.warning("Message \(row.messageID) expired before it could be sent", metadata: ["push.message_id": "\(row.messageID)"])
        outcomes.failed(row, status: "expired", reason: "expired before it could be sent", kind: "expired")
        return true
    }

    // MARK: The link's events

    /// Acts on one event of the connection's reading side.
    func read(_ event: LinkEvent, session: LinkSession) {
        switch event {
        case .window(let allowed):
            let limit = session.update { $0.allow(allowed, window: settings.window) }
            logger.debug("The far end takes \(allowed) requests at once; sending up to \(limit)")
        case .answered(let answers):
            record(answers, session: session)
        case .unanswered(let rows, let reason):
            logger.warning(
                "\(rows.count) notifications unanswered (\(reason)); sending them again"
            )
            metrics.resent.increment(by: rows.count)
            session.update { $0.unanswered(rows) }
        case .timedOut(let rows, let timeout):
            metrics.resent.increment(by: rows.count)
            let limit = session.update { $0.timedOut(rows) }
            logger.warning(
                "\(rows.count) notifications unanswered (no answer within \(timeout.formatted)); sending them again, at most \(limit) at once"
            )
        case .goingAway(let reason):
            // What is in flight is still answered; the writer waits for it, then hangs up.
            logger.info("The connection takes no new requests (\(reason)); reconnecting")
            session.update { $0.stop() }
        case .closed(let reason, let ending):
            if ending == .stalled { status.gatewayStalled(true) }
            let (answered, open) = session.update { ($0.answered, $0.ended(ending)) }
            if answered == 0 && (ending == .dropped || ending == .refused) {
                logger.error("Connection to \(destination.endpoint) failed: \(reason)")
            } else if open {
                logger.warning("Connection lost (\(reason))")
            }
        }
    }

    /// Records answers by their verdicts: the one place a verdict's meaning for the row is decided.
    func record(_ answers: [Answer], session: LinkSession) {
        var sent: [QueuedNotification] = []
        sent.reserveCapacity(answers.count)
        var again: [QueuedNotification] = []
        var wrong = 0
        for answer in answers {
            let row = answer.row
            // Built only for the answers that are logged (not for each of the many accepted).
            var metadata: Logger.Metadata { ["push.message_id": "\(row.messageID)"] }
            switch answer.verdict {
            case .sent:
                sent.append(row)
            case .again(let reason, let countsAsRetry):
                var retry = row
                if countsAsRetry {
                    retry.retries += 1
                    logger.warning("Message \(row.messageID): \(reason); retry \(retry.retries)", metadata: metadata)
                } else {
                    logger.notice("Message \(row.messageID): \(reason); sending it again", metadata: metadata)
                }
                again.append(retry)
            case .retryLater(let delay, let status, let reason, let growing):
                let wait = growing ? "\(delay.formatted), doubling with each attempt" : delay.formatted
                logger.warning("Message \(row.messageID): \(status) \(reason); trying again in \(wait)", metadata: metadata)
                outcomes.deferred(row, delay: delay, status: status, reason: reason, growing: growing)
            case .failed(let failure):
                if failure.wrongEnvironment {
                    wrong += 1
                    logger.warning(
                        "Message \(row.messageID) refused: \(failure.reason) for token \(DeviceToken.redacted(row.deviceToken)) (not valid for these credentials: another topic, environment or Firebase project; the user is kept)",
                        metadata: metadata
                    )
                } else {
                    logger.error("Message \(row.messageID) refused: \(failure.reason) (status \(failure.status))", metadata: metadata)
                }
                outcomes.failed(row, status: failure.status, reason: failure.reason, kind: failure.kind)
            case .unregistered(let status, let reason, let since, let source):
                logger.warning(
                    "Message \(row.messageID) refused: \(status) \(reason) for token \(DeviceToken.redacted(row.deviceToken))",
                    metadata: metadata
                )
                let report = PushQueue.InvalidToken(token: row.deviceToken, reportedAt: since, source: source, app: row.app)
                outcomes.failed(row, status: status, reason: reason, kind: reason, unregistered: report)
            case .credentialsRefused(let status, let reason, let message):
                metrics.credentialsRefused(app: context.rows.app, platform: context.rows.platform.rawValue)
                if session.update({ $0.credentialsRefused() }) {
                    logger.critical("\(message); notifications stay queued", metadata: metadata)
                }
                outcomes.deferred(row, delay: .seconds(60), status: status, reason: reason)
            }
        }
        session.update {
            $0.answered(answers.count)
            $0.retryFirst(again)
        }
        outcomes.sent(sent)
        status.answered(wrong: wrong, other: answers.count - wrong)
        if !sent.isEmpty { status.gatewayStalled(false) }  // a far end that takes notifications reads again
    }
}

/// Rows encoded on several threads at once, in `chunks` interleaved slices; the encodings in the rows' order.
enum ParallelEncoding {
    static func map<Request: Sendable>(
        _ rows: [QueuedNotification],
        chunks: Int,
        _ encode: @escaping @Sendable (QueuedNotification) -> Encoding<Request>
    ) -> [Encoding<Request>] {
        let parts = NIOLockedValueBox([[Encoding<Request>]](repeating: [], count: chunks))
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let encoded = stride(from: chunk, to: rows.count, by: chunks).map { encode(rows[$0]) }
            parts.withLockedValue { $0[chunk] = encoded }
        }
        let encoded = parts.withLockedValue { $0 }
        return rows.indices.map { encoded[$0 % chunks][$0 / chunks] }
    }
}
