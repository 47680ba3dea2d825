import Foundation
import NIOConcurrencyHelpers
package import Webhooks

/// The simulator's receiver of delivery events (`POST /webhooks` on its status page): a backend's side of a webhook,
/// for a local run and the bench. With secrets (`--webhook-secret`) it checks each POST's signature as a receiver
/// must (refused 401 otherwise); it counts the POSTs and events and keeps the last events for the page.
package final class WebhookInbox: Sendable {
    /// What the page and `/status.json` show.
    package struct Counters: Sendable, Equatable, Codable {
        package var posts = 0
        package var events = 0
        /// POSTs refused: a signature that no secret verifies, or a body without events.
        package var refused = 0
    }

    /// One event as the page lists it.
    package struct Event: Sendable, Equatable {
        package let id: String
        package let type: String
        package let token: String?
    }

    private struct Storage {
        var counters = Counters()
        var last: [Event] = []
    }

    private let secrets: [WebhookSecret]
    private let storage = NIOLockedValueBox(Storage())
    static let kept = 20
    /// POSTs up to this size are decoded (their events listed on the page); larger ones only counted.
    static let decodedUpTo = 64 << 10

    /// The elements of `{"events": [...]}`'s array, by a scan of the bytes (strings and nesting followed); nil when the
    /// body is not that shape.
    static func countEvents(_ body: [UInt8]) -> Int? {
        let prefix = Array(#"{"events":["#.utf8)
        guard body.starts(with: prefix) else { return nil }
        var depth = 1
        var count = 0
        var inString = false
        var escaped = false
        var sawValue = false
        for byte in body[prefix.count...] {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 1 && !sawValue {
                    sawValue = true
                    count += 1
                }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return count }
            case UInt8(ascii: ","):
                if depth == 1 { sawValue = false }
            default: break
            }
        }
        return nil
    }

    package init(secrets: [WebhookSecret]) { self.secrets = secrets }

    package var counters: Counters { storage.withLockedValue { $0.counters } }
    package var last: [Event] { storage.withLockedValue { $0.last } }

    /// Takes one POST; the status to answer (204 taken, 400 not events, 401 a bad signature).
    package func receive(id: String?, timestamp: String?, signature: String?, body: [UInt8]) -> Int {
        if !secrets.isEmpty {
            let verified =
                if let id, let timestamp = timestamp.flatMap(Int64.init), let signature {
                    secrets.contains {
                        WebhookSignature.verify(header: signature, id: id, timestamp: timestamp, body: body, secret: $0)
                    }
                } else { false }
            guard verified else {
                storage.withLockedValue { $0.counters.refused += 1 }
                return 401
            }
        }
        // A large POST (a broadcast's thousand events) is counted by a scan, not decoded: on the bench's two cores the
        // receiver shares the machine with the sender it measures.
        let count: Int
        var listed: [Event] = []
        if body.count <= Self.decodedUpTo {
            guard let document = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
                let events = document["events"] as? [[String: Any]]
            else {
                storage.withLockedValue { $0.counters.refused += 1 }
                return 400
            }
            count = events.count
            listed = events.suffix(Self.kept).map { event in
                Event(
                    id: event["id"] as? String ?? "",
                    type: event["type"] as? String ?? "",
                    token: (event["data"] as? [String: Any])?["token"] as? String
                )
            }
        } else {
            guard let counted = Self.countEvents(body) else {
                storage.withLockedValue { $0.counters.refused += 1 }
                return 400
            }
            count = counted
        }
        storage.withLockedValue { storage in
            storage.counters.posts += 1
            storage.counters.events += count
            storage.last = Array((storage.last + listed).suffix(Self.kept))
        }
        return 204
    }
}
