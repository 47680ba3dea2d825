import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Settings
import Support

/// A request and what the server said.
public struct HTTP2Answer: Sendable {
    public var request: HTTP2Request
    public var result: HTTP2Result

    public init(request: HTTP2Request, result: HTTP2Result) {
        self.request = request
        self.result = result
    }
}
