package import NIOCore
import Observability
import Settings
import Storage
import Support

/// The fields of a POSTed form, as raw bytes (validation decides what is valid UTF-8).
///
/// Reads `application/x-www-form-urlencoded` (also assumed when no content type is sent, as old clients do) and
/// `multipart/form-data`. As with PHP's `$_POST`, a repeated field keeps its last value.
package struct FormFields: Sendable, Equatable {
    package var values: [String: [UInt8]]

    package init(_ values: [String: [UInt8]] = [:]) {
        self.values = values
    }

    package subscript(name: String) -> [UInt8]? { values[name] }

    /// Parses `body` according to `contentType`.
    package static func parse(body: ByteBuffer, contentType: String?) throws(FormError) -> FormFields {
        let bytes = body.readableBytesView
        guard let contentType, !contentType.isEmpty else { return urlEncoded(bytes) }
        let mediaType = MediaType(contentType)
        switch mediaType.type {
        case "application/x-www-form-urlencoded":
            return urlEncoded(bytes)
        case "multipart/form-data":
            guard let boundary = mediaType.parameters["boundary"], !boundary.isEmpty, boundary.utf8.count <= 200 else {
                throw FormError.missingBoundary
            }
            return try multipart(body, boundary: boundary)
        default:
            throw FormError.unsupportedContentType
        }
    }

    /// `a=1&b=hello+world%21`: `+` is a space, `%XX` a byte; a `%` not followed by two hex digits stays as it is.
    package static func urlEncoded<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> FormFields {
        var fields = FormFields()
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecoded(parts[0])
            guard !name.isEmpty else { continue }
            fields.values[String(decoding: name, as: UTF8.self)] = parts.count > 1 ? percentDecoded(parts[1]) : []
        }
        return fields
    }

    static func percentDecoded<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                result.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: index)
                if first != bytes.endIndex, bytes.index(after: first) != bytes.endIndex,
                    let high = Hex.value(bytes[first]), let low = Hex.value(bytes[bytes.index(after: first)])
                {
                    result.append(high << 4 | low)
                    index = bytes.index(first, offsetBy: 2)
                    continue
                }
                result.append(byte)
            } else {
                result.append(byte)
            }
            index = bytes.index(after: index)
        }
        return result
    }
}

/// Why a form body could not be read.
package struct FormError: PushChatError, Equatable {
    package let description: String
    /// The code is the text of the 400/415 answer.
    package var code: String { description }
    package var reason: String { description }

    package static let unsupportedContentType = FormError(
        description: "Unsupported content type: send application/x-www-form-urlencoded or multipart/form-data"
    )
    package static let missingBoundary = FormError(description: "Malformed multipart body: no boundary in the content type")
    package static let malformedMultipart = FormError(description: "Malformed multipart body")
    package static let tooManyParts = FormError(
        description: "Malformed multipart body: more than \(FormFields.maxDelimiters) boundary delimiters (the forms have six fields)"
    )
    package static let headersTooLong = FormError(
        description: "Malformed multipart body: a part's headers are longer than \(FormFields.maxHeaderBlock) bytes"
    )
}
