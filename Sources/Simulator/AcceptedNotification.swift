import APNs
package import Foundation
import NIOCore
import Settings
import Support

/// A notification the simulator accepted: what "arrived on the phone".
package struct AcceptedNotification: Sendable, Equatable {
    package let arrival: Date
    /// `simple`, `enhanced` or `frame` (binary), later `http2`.
    package let format: String
    package let identifier: UInt32
    package let token: String
    package let payload: String
    package let priority: UInt8
    package let expiry: UInt32
    /// Which connection of the simulator it came in on (1, 2, …).
    package let connection: Int
    /// HTTP/2 only: `apns-push-type`, `apns-topic` and `apns-collapse-id` as sent.
    package var pushType: String?
    package var topic: String?
    package var collapseID: String?
    /// HTTP/2 with token authentication: the id of the key that signed the provider token (several apps, several keys).
    package var keyID: String?

    package init(
        arrival: Date,
        format: String,
        identifier: UInt32,
        token: String,
        payload: String,
        priority: UInt8,
        expiry: UInt32,
        connection: Int
    ) {
        self.arrival = arrival
        self.format = format
        self.identifier = identifier
        self.token = token
        self.payload = payload
        self.priority = priority
        self.expiry = expiry
        self.connection = connection
    }

    init(_ notification: BinaryNotification, arrival: Date, connection: Int) {
        self.init(
            arrival: arrival,
            format: notification.format.name,
            identifier: notification.identifier,
            token: DeviceToken.hex(notification.token.readableBytesView),
            payload: String(decoding: notification.payload.readableBytesView, as: UTF8.self),
            priority: notification.priority,
            expiry: notification.expiry,
            connection: connection
        )
    }

    /// One line of the record file (and an element of the status page).
    package var json: String {
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(arrival)
        return #"{"time":"\#(time)","format":"\#(format)","id":\#(identifier),"token":"\#(token)","payload":\#(JSONText.quoted(payload)),"#
            + #""priority":\#(priority),"expiry":\#(expiry),"connection":\#(connection)"#
            + [("push_type", pushType), ("topic", topic), ("collapse_id", collapseID), ("key_id", keyID)].compactMap { name, value in
                value.map { ",\"\(name)\":\(JSONText.quoted($0))" }
            }.joined() + "}"
    }
}
