import Foundation
import Storage
import WebPush

extension WebSubscriptionRecord {
    /// What is stored for a browser's subscription once its endpoint's host resolves only to addresses outside the
    /// network (or `webpush_private_hosts` lists it): a subscription is a URL the caller chose, and the daemon will
    /// POST to it (checked again at every send: DNS can change).
    init(checking subscription: WebPushSubscription, privateHosts: Set<String>) async throws(WebPushError) {
        _ = try await subscription.checkedAddresses(privateHosts: privateHosts)
        self.init(
            token: subscription.token,
            endpoint: subscription.endpoint.absoluteString,
            p256dh: subscription.p256dh,
            auth: subscription.auth
        )
    }
}
