import Storage
import Support

/// A parsed `Content-Type` or `Content-Disposition` value: `type; name=value; name="quoted value"`.
struct MediaType: Equatable {
    /// The lower-cased type, e.g. `multipart/form-data`.
    let type: String
    /// Parameters by lower-cased name; quoted values are unquoted.
    let parameters: [String: String]

    init(_ text: String) {
        var parameters: [String: String] = [:]
        var pieces: [String] = []
        var current = ""
        var inQuotes = false
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if inQuotes && character == "\\" {
                escaped = true
            } else if character == "\"" {
                inQuotes.toggle()
            } else if character == ";" && !inQuotes {
                pieces.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        pieces.append(current)
        self.type = pieces[0].trimmingWhitespace().lowercased()
        for piece in pieces.dropFirst() {
            guard let equals = piece.firstIndex(of: "=") else { continue }
            let name = piece[..<equals].trimmingWhitespace().lowercased()
            parameters[name] = piece[piece.index(after: equals)...].trimmingWhitespace()
        }
        self.parameters = parameters
    }
}
