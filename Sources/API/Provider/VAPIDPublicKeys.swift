import NIOConcurrencyHelpers
import WebPush

/// The public halves of the apps' VAPID key files, each read once (`GET /v1/webpush/public-key` is asked by every
/// page that subscribes).
final class VAPIDPublicKeys: Sendable {
    private let keys = NIOLockedValueBox<[String: String]>([:])

    func publicKey(file: String) throws(WebPushError) -> String {
        if let known = keys.withLockedValue({ $0[file] }) { return known }
        let key = try VAPIDKey(file: file).publicKey
        keys.withLockedValue { $0[file] = key }
        return key
    }
}
