package import NIOCore
package import NIOHPACK

/// One request to send on an HTTP/2 connection: a POST's header block and body, and what the caller sent it for.
package struct HTTP2Request: Sendable {
    /// One reference: a request is copied into the stream table, its answer and the worker's report, and each copy
    /// of the tag, headers and body field by field would retain each of them.
    private let storage: Storage

    private final class Storage: Sendable {
        let tag: any Sendable
        let headers: HPACKHeaders
        let body: ByteBuffer
        let tokenGeneration: Int

        init(tag: any Sendable, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
            self.tag = tag
            self.headers = headers
            self.body = body
            self.tokenGeneration = tokenGeneration
        }
    }

    /// What the caller sent the request for (the daemon: its queue row), handed back with its answer or as unanswered:
    /// the client never looks inside.
    package var tag: any Sendable { storage.tag }
    /// The whole header block as written: pseudo-headers first (see ``headerBlock(_:authority:authorization:)``).
    package var headers: HPACKHeaders { storage.headers }
    package var body: ByteBuffer { storage.body }
    /// The generation of the bearer token in its `authorization` header (0 without one): which token an
    /// `ExpiredProviderToken` answer was about.
    package var tokenGeneration: Int { storage.tokenGeneration }

    package init(tag: any Sendable, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
        storage = Storage(tag: tag, headers: headers, body: body, tokenGeneration: tokenGeneration)
    }

    /// The header block of a POST to `path`: the pseudo-headers, `headers` in order, then `authorization` when given.
    /// Headers named in `unique` have a value new on every request and are kept out of HPACK's dynamic table: indexed,
    /// each would evict what repeats (the 4 KB table holds about twenty paths), so the token, topic and the like would
    /// be encoded in full again and again instead of as one index byte, on both ends of the connection.
    /// `pathIsUnique`: the path differs on every request (APNs puts the device token in it) and is kept out too.
    package static func headerBlock(
        path: String,
        pathIsUnique: Bool = false,
        authority: String,
        headers: [(String, String)],
        unique: Set<String> = [],
        authorization: String?
    ) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(headers.count + 5)
        block.add(name: ":method", value: "POST")
        block.add(name: ":scheme", value: "https")
        block.add(name: ":path", value: path, indexing: pathIsUnique ? .nonIndexable : .indexable)
        block.add(name: ":authority", value: authority)
        for (name, value) in headers {
            block.add(name: name, value: value, indexing: unique.contains(name) ? .nonIndexable : .indexable)
        }
        if let authorization { block.add(name: "authorization", value: authorization) }
        return block
    }
}
