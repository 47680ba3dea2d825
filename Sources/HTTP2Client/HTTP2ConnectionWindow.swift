import NIOCore
import NIOHTTP2

/// The connection-level receive window of an HTTP/2 connection: how much the peer may send (DATA on all streams)
/// before it must wait for a WINDOW_UPDATE on stream 0.
package struct HTTP2ConnectionWindow: Sendable, Equatable {
    /// Every connection starts with this window (RFC 9113 §6.9.2), whatever SETTINGS say.
    package static let initialSize = 65_535
    /// The largest window HTTP/2 allows.
    package static let maximumSize = Int(Int32.max)

    /// The window granted back whenever half of it is used.
    package let target: Int

    package init(target: Int = 1 << 20) {
        precondition(target > 0 && target <= Self.maximumSize, "an HTTP/2 window is 1…2^31-1 bytes")
        self.target = target
    }

    /// With `remaining` bytes left to the peer: the increment that restores the target once half of it is used,
    /// else nil. The first call (at 65,535 or less) also raises the window from the protocol's default to the target.
    package func increment(remaining: Int) -> Int? {
        remaining <= target / 2 ? target - max(remaining, 0) : nil
    }
}
