import APNs
import NIOConcurrencyHelpers
import Settings
import Storage
import Support
import WebPush

/// The subscriptions of the web rows a sender holds, loaded with each claim (``SubscribedRows``) and read when a row
/// is encoded: what its message is encrypted for and where it goes. Bounded: past ``limit`` entries only the last
/// claim's are kept (a row is encoded within a window of its claim).
final class WebSubscriptions: Sendable {
    enum Entry: Sendable {
        case subscribed(WebPushSubscription)
        /// No subscription names the token any more (pruned, or never stored).
        case gone
        /// The stored subscription cannot be used (written around the API's checks): why.
        case unusable(String)
    }

    static let limit = 50_000

    private let entries = NIOLockedValueBox<[String: Entry]>([:])

    func entry(_ token: String) -> Entry? { entries.withLockedValue { $0[token] } }

    /// Notes `records` as the subscriptions of `tokens` (a token without a record is gone).
    func store(_ records: [WebSubscriptionRecord], for tokens: [String]) {
        var batch: [String: Entry] = [:]
        for token in tokens { batch[token] = .gone }
        for record in records {
            let keys: WebPushSubscription
            do {
                keys = try WebPushSubscription(json: Array(Self.json(record).utf8))
            } catch {
                batch[record.token] = .unusable("the stored subscription is unusable: \(error.reason)")
                continue
            }
            batch[record.token] = .subscribed(keys)
        }
        entries.withLockedValue { entries in
            if entries.count + batch.count > Self.limit { entries = [:] }
            entries.merge(batch) { $1 }
        }
    }

    static func json(_ record: WebSubscriptionRecord) -> String {
        #"{"endpoint":"# + JSONText.quoted(record.endpoint) + #","keys":{"p256dh":""# + record.p256dh + #"","auth":""#
            + record.auth + #""}}"#
    }
}

/// A web sender's rows: each claim's subscriptions loaded beside it (one statement per claim), so that encoding, which
/// may not wait, finds them.
struct SubscribedRows: RowSource {
    let base: any RowSource
    let subscriptions: WebSubscriptions

    var app: String { base.app }
    var platform: Platform { base.platform }
    var traffic: PushQueue.Traffic { base.traffic }

    func claim(limit: Int, bulkLimit: Int?) async throws -> [QueuedNotification] {
        let rows = try await base.claim(limit: limit, bulkLimit: bulkLimit)
        guard !rows.isEmpty else { return rows }
        let tokens = rows.map(\.deviceToken)
        subscriptions.store(try await base.webSubscriptions(tokens), for: tokens)
        return rows
    }

    func hasUnclaimed() async throws -> Bool { try await base.hasUnclaimed() }

    func forApp(_ app: String, platform: Platform) -> SubscribedRows {
        SubscribedRows(base: base.forApp(app, platform: platform), subscriptions: subscriptions)
    }

    func forTraffic(_ traffic: PushQueue.Traffic) -> SubscribedRows {
        SubscribedRows(base: base.forTraffic(traffic), subscriptions: subscriptions)
    }

    func webSubscriptions(_ tokens: [String]) async throws -> [WebSubscriptionRecord] { try await base.webSubscriptions(tokens) }
}
