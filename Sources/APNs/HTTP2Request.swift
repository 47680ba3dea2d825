import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Settings
import Support

/// One request to send on an HTTP/2 connection.
public struct HTTP2Request: Sendable {
    public var notification: QueuedNotification
    public var headers: HPACKHeaders
    public var body: ByteBuffer
    /// The provider token's generation (0 with certificate authentication).
    public var tokenGeneration: Int

    public init(notification: QueuedNotification, headers: HPACKHeaders, body: ByteBuffer, tokenGeneration: Int) {
        self.notification = notification
        self.headers = headers
        self.body = body
        self.tokenGeneration = tokenGeneration
    }
}
