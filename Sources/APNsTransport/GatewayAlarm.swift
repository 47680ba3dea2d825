import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Raised as soon as the gateway sends a byte or the connection ends. The binary gateway only ever speaks to report
/// an error, so from then on nothing written may be counted as accepted until the error response is read.
package final class GatewayAlarm: Sendable {
    private let raised = NIOLockedValueBox(false)

    package init() {}

    package var isRaised: Bool { raised.withLockedValue { $0 } }

    func raise() { raised.withLockedValue { $0 = true } }
}
