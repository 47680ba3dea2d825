/// Where a device's notifications go: Apple's push service or Firebase Cloud Messaging (`devices.platform`,
/// `active_users.platform`, `push_queue.platform`).
package enum Platform: String, Sendable, CaseIterable, Hashable {
    /// An iPhone (every row from before Android).
    case apns
    /// An Android phone, by its FCM registration token.
    case fcm
}
