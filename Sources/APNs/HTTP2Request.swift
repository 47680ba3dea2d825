import Foundation
import Logging
package import NIOCore
package import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// One request to send on an HTTP/2 connection.
package struct HTTP2Request: Sendable {
    /// One reference: a request is copied into the stream table, its answer and the worker's report, and each copy
    /// of the row, headers and body field by field would retain each of them.
    private let storage: Storage

    private final class Storage: Sendable {
        let notification: QueuedNotification
        let headers: HPACKHeaders
        let body: ByteBuffer
        let tokenGeneration: Int

        init(notification: QueuedNotification, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
            self.notification = notification
            self.headers = headers
            self.body = body
            self.tokenGeneration = tokenGeneration
        }
    }

    package var notification: QueuedNotification { storage.notification }
    /// The whole header block as written: pseudo-headers first (see ``headerBlock(_:authority:authorization:)``).
    package var headers: HPACKHeaders { storage.headers }
    package var body: ByteBuffer { storage.body }
    /// The provider token's generation (0 with certificate authentication).
    package var tokenGeneration: Int { storage.tokenGeneration }

    package init(notification: QueuedNotification, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
        storage = Storage(notification: notification, headers: headers, body: body, tokenGeneration: tokenGeneration)
    }

    /// Headers whose value is new on every request: kept out of HPACK's dynamic table. Indexed, each would evict
    /// what repeats (the 4 KB table holds about twenty paths), so the provider token, topic and push type would be
    /// encoded in full again and again instead of as one index byte — on both ends of the connection.
    static func isUnique(_ name: String) -> Bool { name == "apns-id" || name == "apns-expiration" }

    /// The header block of `notification`'s request: `:method`, `:scheme`, `:path`, `:authority`, the apns headers,
    /// and `authorization` (its value, `bearer <token>`) when a provider token is given.
    package static func headerBlock(_ notification: HTTP2Notification, authority: String, authorization: String?) -> HPACKHeaders {
        headerBlock(
            path: notification.path,
            pathIsUnique: true,
            authority: authority,
            headers: notification.headers,
            authorization: authorization
        )
    }

    /// The header block of a POST to `path`: the pseudo-headers, `headers` in order (those ``isUnique(_:)`` names kept
    /// out of HPACK's table), then `authorization` when given. `pathIsUnique`: the path differs on every request (APNs
    /// puts the device token in it) and is kept out of the table too; FCM's is the same on every request.
    package static func headerBlock(
        path: String,
        pathIsUnique: Bool = false,
        authority: String,
        headers: [(String, String)],
        authorization: String?
    ) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(headers.count + 5)
        block.add(name: ":method", value: "POST")
        block.add(name: ":scheme", value: "https")
        block.add(name: ":path", value: path, indexing: pathIsUnique ? .nonIndexable : .indexable)
        block.add(name: ":authority", value: authority)
        for (name, value) in headers {
            block.add(name: name, value: value, indexing: isUnique(name) ? .nonIndexable : .indexable)
        }
        if let authorization { block.add(name: "authorization", value: authorization) }
        return block
    }
}
