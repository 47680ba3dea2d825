import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A request and what the server said.
package struct HTTP2Answer: Sendable {
    package var request: HTTP2Request
    package var result: HTTP2Result
    /// The answer's body as it came (at most ``HTTP2StreamStateMachine/maxAnswerBody`` bytes): FCM's error objects.
    package var body: [UInt8] = []
    /// The `retry-after` header, if any.
    package var retryAfter: String?

    package init(request: HTTP2Request, result: HTTP2Result) {
        self.request = request
        self.result = result
    }
}
