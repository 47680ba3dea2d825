/// What a provider API key may do (`pushchat-api keys create --scope`), stored in `api_keys.scopes`.
package enum KeyScope: String, Sendable, CaseIterable, Comparable {
    /// `POST /v1/notifications` to tokens or users.
    case send
    /// The same to a room, to every device (`all`) or to chat udids: reaches people the caller did not name.
    case broadcast
    /// `GET /v1/devices?user=…` (tokens of other people).
    case devicesRead = "devices:read"
    /// `POST /v1/devices`, `DELETE /v1/devices/TOKEN`.
    case devicesWrite = "devices:write"
    /// `GET /v1/notifications/ID`, for the key's own notifications.
    case status

    /// What `keys create` gives without `--scope`: no broadcast, no listing.
    package static let defaults: Set<KeyScope> = [.send, .devicesWrite, .status]

    package static func < (lhs: KeyScope, rhs: KeyScope) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    /// Known scopes from stored text; unknown ones (a newer version's) are ignored.
    static func parse(_ names: [String]) -> Set<KeyScope> { Set(names.compactMap(KeyScope.init(rawValue:))) }
}
