import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A request and what the server said, as it said it: the status, the body and `retry-after`. What it means is the
/// destination's to say (APNs: ``HTTP2Result``; FCM: `FCMAnswer`).
package struct HTTP2Answer: Sendable {
    package var request: HTTP2Request
    /// The `:status` of the answer's HEADERS (0 if it had none).
    package var status: Int
    /// The answer's body as it came (at most ``HTTP2StreamStateMachine/maxAnswerBody`` bytes): an error's JSON.
    package var body: [UInt8] = []
    /// The `retry-after` header, if any.
    package var retryAfter: String?

    package init(request: HTTP2Request, status: Int, body: [UInt8] = [], retryAfter: String? = nil) {
        self.request = request
        self.status = status
        self.body = body
        self.retryAfter = retryAfter
    }
}
