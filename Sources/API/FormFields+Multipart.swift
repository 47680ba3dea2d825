import MultipartKit
package import NIOCore
import Support

extension FormFields {
    /// Parses an RFC 7578 `multipart/form-data` body with multipart-kit's parser. Parts without a `name` are
    /// skipped; a file part's content is its value; a body that stops before its closing delimiter is refused.
    package static func multipart(_ body: ByteBuffer, boundary: String) throws(FormError) -> FormFields {
        // multipart-kit traps on an empty boundary; the caller has refused one already.
        guard !boundary.isEmpty else { throw .missingBoundary }
        let closing = Array("--\(boundary)--".utf8)
        let bytes = body.readableBytesView
        // An empty form: the closing delimiter alone (the parser expects a part after a delimiter).
        if bytes.starts(with: closing) { return FormFields() }
        guard bytes.firstRange(of: closing) != nil else { throw .malformedMultipart }
        try headerNamesAreASCII(bytes, boundary: Array(boundary.utf8))

        let parser = MultipartParser(boundary: boundary)
        var fields = FormFields()
        var name: String?
        var value: [UInt8] = []
        var partOpen = false
        parser.onHeader = { field, headerValue in
            partOpen = true
            guard field.trimmingWhitespace().lowercased() == "content-disposition" else { return }
            let disposition = MediaType(headerValue)
            name = disposition.type == "form-data" ? disposition.parameters["name"] : nil
        }
        parser.onBody = { chunk in
            partOpen = true
            value.append(contentsOf: chunk.readableBytesView)
        }
        parser.onPartComplete = {
            if let name { fields.values[name] = value }
            (name, value, partOpen) = (nil, [], false)
        }
        do {
            try parser.execute(body)
        } catch {
            throw .malformedMultipart
        }
        guard !partOpen else { throw .malformedMultipart }
        return fields
    }

    /// The most delimiters a body may hold (anywhere, also inside a value): the forms have six fields. With the cap on
    /// a header block, it bounds the walk below to a few hundred KiB of steps whatever the body.
    static let maxDelimiters = 64
    /// The longest header block walked: a part's headers are a Content-Disposition and a Content-Type.
    static let maxHeaderBlock = 4096

    /// multipart-kit 4.7.1 traps on a header-name byte above 0x7F (its lookup table has 128 entries): one request
    /// could stop the API. The fuzzer found it. Header names are ASCII tokens, so a body with another byte in one is
    /// refused before the parser sees it. This walks every header block as multipart-kit does (after a delimiter and
    /// CRLF: a name up to its colon, a value up to CR, LF, and so on until a line starts with CR), from every
    /// occurrence of the delimiter (so also from one the parser would read as content: stricter, never looser).
    /// A walk may run over later delimiters, so each is bounded: at most ``maxDelimiters`` walks of at most
    /// ``maxHeaderBlock`` bytes, past which the body is refused (unbounded, the walks cost the square of the body).
    static func headerNamesAreASCII(_ bytes: ByteBufferView, boundary: [UInt8]) throws(FormError) {
        let (cr, lf, colon) = (UInt8(ascii: "\r"), UInt8(ascii: "\n"), UInt8(ascii: ":"))
        let delimiter = Array("--".utf8) + boundary
        let end = bytes.endIndex
        var searchFrom = bytes.startIndex
        var delimiters = 0
        while let found = bytes[searchFrom...].firstRange(of: delimiter) {
            delimiters += 1
            guard delimiters <= Self.maxDelimiters else { throw .tooManyParts }
            searchFrom = found.upperBound
            var position = found.upperBound
            guard position + 1 < end, bytes[position] == cr, bytes[position + 1] == lf else { continue }
            position += 2
            let blockEnd = min(end, position + Self.maxHeaderBlock)
            headers: while position < end {
                guard position < blockEnd else { throw .headersTooLong }
                var nameLength = 0
                while position < end {
                    let byte = bytes[position]
                    if byte == cr { break headers }  // the end of the headers (or a line the parser refuses)
                    if byte == colon && nameLength > 0 { break }
                    if byte > 0x7F { throw .malformedMultipart }
                    nameLength += 1
                    position += 1
                    guard position < blockEnd else { throw .headersTooLong }
                }
                guard position < end, let valueEnd = bytes[position..<blockEnd].firstIndex(of: cr) else {
                    if blockEnd < end { throw .headersTooLong }
                    break
                }
                position = valueEnd + 2
            }
        }
    }
}
