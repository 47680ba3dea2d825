import Support

/// Builds the JSON payload of a chat notification, exactly the tutorial's shape:
/// `{"aps":{"alert":"NAME: TEXT","sound":"default"}}`.
///
/// The JSON-escaped name is cut to 20 bytes and the escaped text to 190, so the payload always fits the binary
/// interface's 256 bytes. Cuts fall between characters, never inside a multi-byte character or an escape sequence,
/// so the result is always valid JSON. Non-ASCII text stays UTF-8 (no `\u` escapes), which keeps more of it.
package enum PushPayload {
    /// Most bytes the escaped sender name takes.
    package static let maximumNameBytes = 20
    /// Most bytes the escaped message text takes.
    package static let maximumTextBytes = 190
    /// The binary interface's limit for commands 0 and 1, which every chat payload respects.
    package static let maximumPayloadBytes = 256

    /// What comes before the escaped alert text.
    package static let prefix = #"{"aps":{"alert":""#
    /// What comes after it.
    package static let suffix = #"","sound":"default"}}"#

    /// A chat message's payload around its sender's name: `head` + alert name + `tail`. The one place a chat payload
    /// is built: the API binds `head` and `tail` into the message statement, which puts each sender's stored
    /// `alert_name` (``alertName(_:)``, escaped at join) between them, in the same statement that fans it out.
    package struct Chat: Sendable, Equatable {
        package let head: String
        package let tail: String
        /// The same message for an Android member, as FCM's message without its token: the text in the
        /// cross-platform notification's body, high priority, the default sound.
        package let fcmHead: String
        package let fcmTail: String
        /// The same message for a browser, in the Declarative Web Push JSON: the sender's name as the title, the
        /// text as the body, a click opening the site (`/`, resolved against the subscribing page's origin).
        package let webHead: String
        package let webTail: String

        package init(text: String) {
            head = PushPayload.prefix
            tail = ": " + PushPayload.alertText(text) + PushPayload.suffix
            fcmHead = #"{"notification":{"body":""#
            fcmTail = ": " + PushPayload.alertText(text) + #""},"android":{"priority":"high","notification":{"sound":"default"}}}"#
            webHead = #"{"web_push":8030,"notification":{"title":""#
            webTail = #"","body":""# + PushPayload.alertText(text) + #"","navigate":"/"}}"#
        }

        /// The payload for a sender whose stored alert name is `alertName`.
        package func payload(alertName: String) -> String { head + alertName + tail }
    }

    /// The notification payload for `text` sent by `name`.
    package static func chat(name: String, text: String) -> String {
        Chat(text: text).payload(alertName: alertName(name))
    }

    /// `{"aps":{"alert":MESSAGE,"sound":"default"}}`: a chat payload without a sender (`queue test`, as the
    /// tutorial's `push_test.php`).
    package static func alert(_ message: String) -> String { prefix + alertText(message) + suffix }

    /// The sender's name as it appears in the payload: escaped, at most 20 bytes.
    package static func alertName(_ name: String) -> String { escaped(name, limit: maximumNameBytes) }

    /// The message text as it appears in the payload: escaped, at most 190 bytes.
    package static func alertText(_ text: String) -> String { escaped(text, limit: maximumTextBytes) }

    /// `text` as the inside of a JSON string, cut at a character boundary to at most `limit` bytes.
    package static func escaped(_ text: String, limit: Int) -> String {
        var result = ""
        var used = 0
        for character in text {
            var piece = ""
            for scalar in character.unicodeScalars {
                piece += JSONText.escape(scalar)
            }
            let size = piece.utf8.count
            guard used + size <= limit else { break }
            result += piece
            used += size
        }
        return result
    }
}
