package import APNs
import Foundation
import NIOConcurrencyHelpers
import Settings
package import Support
import Webhooks

#if canImport(Glibc)
import Glibc
#endif

/// Counters, the recent notifications, the record file and the runtime-adjustable faults, shared by every
/// connection. Handlers report in batches (one lock per read, not per frame).
package final class SimulatorState: Sendable {
    /// What the status page shows.
    package struct Counters: Sendable, Equatable, Codable {
        package var connections = 0
        package var refusedConnections = 0
        package var accepted = 0
        package var acceptedByFormat: [String: Int] = [:]
        /// Error responses sent, by status byte.
        package var rejectedByStatus: [String: Int] = [:]
        /// Connections closed on purpose without an error response (fault injection).
        package var abruptCloses = 0
        package var feedbackConnections = 0
        package var feedbackTuplesSent = 0
        /// Notifications written to the record file (with a token prefix: those whose token has it).
        package var recorded = 0
    }

    private struct Storage {
        var counters = Counters()
        var recent: [AcceptedNotification] = []
        var all: [AcceptedNotification] = []
        var faults: SimulatorConfiguration.Faults
        var refuseUntil: ContinuousClock.Instant?
        var unregistered: Set<String>
        var feedbackTuples: [FeedbackTuple]
        var feedbackFault: SimulatorConfiguration.FeedbackFault
        var nextConnection = 0
    }

    private let storage: NIOLockedValueBox<Storage>
    /// Called with every accepted notification (the bench's latency figures), outside the lock. Held by reference:
    /// a closure read out of a generic box (through its `inout` access) came back wrapped in one more reabstraction
    /// thunk on every read, so each notification walked a chain as long as the notifications before it (the
    /// simulator's thread spent 84% of its time there three minutes into a million-row broadcast).
    private let observer = NIOLockedValueBox<Observer?>(nil)

    /// See ``observer``.
    private final class Observer: Sendable {
        let call: @Sendable (AcceptedNotification) -> Void
        init(_ call: @escaping @Sendable (AcceptedNotification) -> Void) { self.call = call }
    }
    private let keepAll: Bool
    /// Delivery events POSTed to the status page (a backend's webhook receiver).
    package let webhooks: WebhookInbox
    /// The browsers and their push service (Web Push).
    package let webPush: WebPushService
    private let recentLimit: Int
    private let recordDescriptor: Int32?
    private let recordTokenPrefix: String?

    package init(configuration: SimulatorConfiguration) throws {
        var storage = Storage(
            faults: configuration.faults,
            unregistered: Set(configuration.unregisteredTokens.map { $0.lowercased() }),
            feedbackTuples: configuration.feedbackTuples,
            feedbackFault: configuration.feedbackFault
        )
        if let refuse = configuration.faults.refuseConnectionsFor {
            storage.refuseUntil = .now + refuse
        }
        self.storage = NIOLockedValueBox(storage)
        self.keepAll = configuration.keepAll
        self.webhooks = WebhookInbox(secrets: try configuration.webhookSecrets.map { try WebhookSecret(parsing: $0) })
        self.webPush = WebPushService(options: configuration.webPush)
        self.recentLimit = configuration.recentLimit
        self.recordTokenPrefix = configuration.recordTokenPrefix
        if let file = configuration.recordFile {
            let directory = (file as NSString).deletingLastPathComponent
            if !directory.isEmpty { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            let descriptor = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw SimulatorError(reason: "cannot open the record file \(file)") }
            recordDescriptor = descriptor
        } else {
            recordDescriptor = nil
        }
    }

    deinit {
        if let recordDescriptor { close(recordDescriptor) }
    }

    // MARK: Connections

    /// A new gateway connection: its number, or `nil` when connections are being refused.
    func connectionOpened() -> Int? {
        storage.withLockedValue { storage in
            if let until = storage.refuseUntil, ContinuousClock.now < until {
                storage.counters.refusedConnections += 1
                return nil
            }
            storage.nextConnection += 1
            storage.counters.connections += 1
            return storage.nextConnection
        }
    }

    var faults: SimulatorConfiguration.Faults { storage.withLockedValue { $0.faults } }

    func isUnregistered(_ token: String) -> Bool { storage.withLockedValue { $0.unregistered.contains(token) } }

    var unregisteredSnapshot: Set<String> { storage.withLockedValue { $0.unregistered } }

    // MARK: Recording

    /// Calls `observer` with every notification accepted from now on (nil: no more).
    package func observe(_ observer: (@Sendable (AcceptedNotification) -> Void)?) {
        self.observer.withLockedValue { $0 = observer.map(Observer.init) }
    }

    /// Records a batch of accepted notifications, and an error response if the batch ended with one.
    func record(_ batch: [AcceptedNotification], rejected: BinaryErrorResponse.Status? = nil, abruptClose: Bool = false) {
        if let observer = observer.withLockedValue({ $0 }) {
            for notification in batch { observer.call(notification) }
        }
        var recorded = 0
        if let recordDescriptor, !batch.isEmpty {
            var text = ""
            for notification in batch where recordTokenPrefix.map(notification.token.hasPrefix) ?? true {
                text += notification.json + "\n"
                recorded += 1
            }
            text.withUTF8 { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(recordDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
        storage.withLockedValue { storage in
            storage.counters.accepted += batch.count
            storage.counters.recorded += recorded
            for notification in batch {
                storage.counters.acceptedByFormat[notification.format, default: 0] += 1
            }
            if let rejected { storage.counters.rejectedByStatus[String(rejected.rawValue), default: 0] += 1 }
            if abruptClose { storage.counters.abruptCloses += 1 }
            if keepAll { storage.all.append(contentsOf: batch) }
            storage.recent.append(contentsOf: batch.suffix(recentLimit))
            if storage.recent.count > recentLimit { storage.recent.removeFirst(storage.recent.count - recentLimit) }
        }
    }

    /// Counts an HTTP/2 answer other than 200 (`410 Unregistered`).
    func recordRejection(_ label: String) {
        storage.withLockedValue { $0.counters.rejectedByStatus[label, default: 0] += 1 }
    }

    // MARK: Feedback

    /// The tuples to serve now; Apple clears its list once it has been read.
    func takeFeedback() -> (tuples: [FeedbackTuple], fault: SimulatorConfiguration.FeedbackFault) {
        storage.withLockedValue { storage in
            storage.counters.feedbackConnections += 1
            let tuples = storage.feedbackTuples
            storage.feedbackTuples = []
            storage.counters.feedbackTuplesSent += tuples.count
            return (tuples, storage.feedbackFault)
        }
    }

    // MARK: Reading and adjusting (status page, tests)

    package var counters: Counters { storage.withLockedValue { $0.counters } }

    /// The last `limit` accepted notifications, oldest first.
    package func recent(limit: Int) -> [AcceptedNotification] {
        storage.withLockedValue { Array($0.recent.suffix(limit)) }
    }

    /// Every accepted notification (with `keepAll`).
    package var accepted: [AcceptedNotification] { storage.withLockedValue { $0.all } }

    package func setFaults(_ faults: SimulatorConfiguration.Faults) {
        storage.withLockedValue { storage in
            storage.faults = faults
            storage.refuseUntil = faults.refuseConnectionsFor.map { .now + $0 }
        }
    }

    package func setUnregistered(_ tokens: Set<String>) {
        storage.withLockedValue { $0.unregistered = Set(tokens.map { $0.lowercased() }) }
    }

    package func setFeedback(_ tuples: [FeedbackTuple], fault: SimulatorConfiguration.FeedbackFault = .none) {
        storage.withLockedValue { storage in
            storage.feedbackTuples = tuples
            storage.feedbackFault = fault
        }
    }
}

/// The simulator cannot start.
package struct SimulatorError: PushChatError {
    package typealias Code = ErrorCode<SimulatorError>
    package let code: Code
    package let reason: String
    package init(code: Code = .setupFailed, reason: String) {
        self.code = code
        self.reason = reason
    }
    package var description: String { "simulator: \(reason)" }
}

extension ErrorCode where Domain == SimulatorError {
    /// A listener, certificate or option the simulator cannot use.
    package static let setupFailed = Self("setupFailed")
}
