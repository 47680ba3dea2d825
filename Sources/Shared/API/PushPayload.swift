/// Builds the JSON payload of a chat notification, exactly the tutorial's shape:
/// `{"aps":{"alert":"NAME: TEXT","sound":"default"}}`.
///
/// The JSON-escaped name is cut to 20 bytes and the escaped text to 190, so the payload always fits the binary
/// interface's 256 bytes. Cuts fall between characters, never inside a multi-byte character or an escape sequence,
/// so the result is always valid JSON. Non-ASCII text stays UTF-8 (no `\u` escapes), which keeps more of it.
public enum PushPayload {
    /// Most bytes the escaped sender name takes.
    public static let maximumNameBytes = 20
    /// Most bytes the escaped message text takes.
    public static let maximumTextBytes = 190
    /// The binary interface's limit for commands 0 and 1, which every chat payload respects.
    public static let maximumPayloadBytes = 256

    /// The notification payload for `text` sent by `name`.
    public static func chat(name: String, text: String) -> String {
        let alert = escaped(name, limit: maximumNameBytes) + ": " + escaped(text, limit: maximumTextBytes)
        return #"{"aps":{"alert":""# + alert + #"","sound":"default"}}"#
    }

    /// `text` as the inside of a JSON string, cut at a character boundary to at most `limit` bytes.
    public static func escaped(_ text: String, limit: Int) -> String {
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
