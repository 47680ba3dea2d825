import APNs
import Foundation
import NIOConcurrencyHelpers
import Settings
import Storage
import Support
import WebPush

/// The subscriptions of the web rows a sender holds, loaded with each claim (``SubscribedRows``) and read when a row
/// is encoded: what its message is encrypted for and where it goes. Bounded: at most ``limit`` entries, the latest
/// claims' (a row is encoded within a window of its claim).
final class WebSubscriptions: Sendable {
    enum Entry: Sendable {
        case subscribed(WebPushSubscription)
        /// No subscription names the token any more (pruned, or never stored).
        case gone
        /// The stored subscription cannot be used (written around the API's checks): why.
        case unusable(String)
    }

    /// Entries kept: the last claims' (at least half this many rows), far more than a sender holds in flight.
    static let limit = 50_000

    /// The entries of the latest claims, and of those before them: a row claimed a while ago (written again after
    /// its connection dropped) still finds its subscription.
    private struct Generations {
        var current: [String: Entry] = [:]
        var previous: [String: Entry] = [:]
    }

    private let entries = NIOLockedValueBox(Generations())

    func entry(_ token: String) -> Entry? { entries.withLockedValue { $0.current[token] ?? $0.previous[token] } }

    /// Notes `records` as the subscriptions of `tokens` (a token without a record is gone).
    func store(_ records: [WebSubscriptionRecord], for tokens: [String]) {
        var batch: [String: Entry] = [:]
        for token in tokens { batch[token] = .gone }
        for record in records {
            let keys: WebPushSubscription
            do throws(WebPushError) {
                // Checked as the API checked it, without a JSON round trip (a claim reads a thousand at a time).
                guard let endpoint = URL(string: record.endpoint) else {
                    throw WebPushError(code: .badEndpoint, reason: "the endpoint is not a URL")
                }
                keys = try WebPushSubscription(endpoint: endpoint, p256dh: record.p256dh, auth: record.auth)
            } catch {
                batch[record.token] = .unusable("the stored subscription is unusable: \(error.reason)")
                continue
            }
            batch[record.token] = .subscribed(keys)
        }
        entries.withLockedValue { entries in
            if entries.current.count + batch.count > Self.limit / 2 {
                entries.previous = entries.current
                entries.current = [:]
            }
            entries.current.merge(batch) { $1 }
        }
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
