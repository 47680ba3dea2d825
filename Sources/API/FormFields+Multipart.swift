import MultipartKit
import NIOCore
import Support

extension FormFields {
    /// Parses an RFC 7578 `multipart/form-data` body with multipart-kit's parser. Parts without a `name` are
    /// skipped; a file part's content is its value; a body that stops before its closing delimiter is refused.
    public static func multipart(_ body: ByteBuffer, boundary: String) throws(FormError) -> FormFields {
        // multipart-kit traps on an empty boundary; the caller has refused one already.
        guard !boundary.isEmpty else { throw .missingBoundary }
        let closing = Array("--\(boundary)--".utf8)
        let bytes = body.readableBytesView
        // An empty form: the closing delimiter alone (the parser expects a part after a delimiter).
        if bytes.starts(with: closing) { return FormFields() }
        guard bytes.firstRange(of: closing) != nil else { throw .malformedMultipart }

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
}
