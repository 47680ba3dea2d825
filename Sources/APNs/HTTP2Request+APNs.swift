package import HTTP2Client
package import NIOCore
package import NIOHPACK

/// The daemon's requests: each carries its queue row as its tag.
extension HTTP2Request {
    package init(notification: QueuedNotification, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
        self.init(tag: notification, headers: headers, body: body, tokenGeneration: tokenGeneration)
    }

    /// The queue row this request was made for (every request the daemon makes has one).
    package var notification: QueuedNotification {
        guard let row = tag as? QueuedNotification else { preconditionFailure("an HTTP/2 request made without its queue row") }
        return row
    }

    /// APNs headers whose value is new on every request (kept out of HPACK's table).
    static let apnsUniqueHeaders: Set<String> = ["apns-id", "apns-expiration"]

    /// The header block of `notification`'s request: `:method`, `:scheme`, `:path`, `:authority`, the apns headers,
    /// and `authorization` (its value, `bearer <token>`) when a provider token is given.
    package static func headerBlock(_ notification: HTTP2Notification, authority: String, authorization: String?) -> HPACKHeaders {
        headerBlock(
            path: notification.path,
            pathIsUnique: true,
            authority: authority,
            headers: notification.headers,
            unique: apnsUniqueHeaders,
            authorization: authorization
        )
    }
}
