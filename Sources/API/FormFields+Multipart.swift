import Observability
import Settings
import Storage
import Support

extension FormFields {
    /// Parses an RFC 7578 `multipart/form-data` body. Parts without a `name` are skipped; a file part's content is
    /// its value.
    public static func multipart<Bytes: RandomAccessCollection<UInt8>>(
        _ body: Bytes,
        boundary: [UInt8]
    ) throws(FormError) -> FormFields where Bytes.Index == Int {
        let delimiter = Array("--".utf8) + boundary
        let separator = Array("\r\n".utf8) + delimiter
        guard var position = find(delimiter, in: body, from: body.startIndex) else { throw .malformedMultipart }
        position += delimiter.count
        var fields = FormFields()
        while true {
            // After a delimiter: `--` ends the body, CRLF starts a part (transport padding before it is allowed).
            if body.count - (position - body.startIndex) >= 2, body[position] == UInt8(ascii: "-"),
                body[position + 1] == UInt8(ascii: "-")
            {
                return fields
            }
            while position < body.endIndex && (body[position] == UInt8(ascii: " ") || body[position] == UInt8(ascii: "\t")) {
                position += 1
            }
            guard position + 1 < body.endIndex, body[position] == UInt8(ascii: "\r"), body[position + 1] == UInt8(ascii: "\n")
            else { throw .malformedMultipart }
            position += 2
            guard let headerEnd = find(Array("\r\n\r\n".utf8), in: body, from: position) else {
                // A part with no headers at all starts directly with the blank line.
                throw .malformedMultipart
            }
            let headers = body[position..<headerEnd]
            let contentStart = headerEnd + 4
            guard let contentEnd = find(separator, in: body, from: contentStart) else { throw .malformedMultipart }
            if let name = partName(headers) {
                fields.values[name] = Array(body[contentStart..<contentEnd])
            }
            position = contentEnd + separator.count
        }
    }

    /// The `name` parameter of the part's `Content-Disposition: form-data` header.
    static func partName<Bytes: Collection<UInt8>>(_ headers: Bytes) -> String? {
        let text = String(decoding: headers, as: UTF8.self)
        for line in text.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            guard line[..<colon].trimmingWhitespace().lowercased() == "content-disposition" else { continue }
            let value = MediaType(String(line[line.index(after: colon)...]))
            guard value.type == "form-data" else { return nil }
            return value.parameters["name"]
        }
        return nil
    }

    static func find<Bytes: RandomAccessCollection<UInt8>>(_ needle: [UInt8], in haystack: Bytes, from start: Int) -> Int?
    where Bytes.Index == Int {
        guard let first = needle.first, haystack.endIndex - start >= needle.count else { return nil }
        var index = start
        let last = haystack.endIndex - needle.count
        while index <= last {
            if haystack[index] == first {
                var matched = 1
                while matched < needle.count && haystack[index + matched] == needle[matched] { matched += 1 }
                if matched == needle.count { return index }
            }
            index += 1
        }
        return nil
    }
}
