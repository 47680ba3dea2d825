package import Foundation
import Support
package import _CryptoExtras

/// A Google service account, from the JSON key file the Firebase console gives (`fcm_service_account_file`): the
/// project the messages go to, the account's e-mail and RSA private key, and the OAuth 2.0 token URI, used as
/// Google's own libraries use them (`project_id` in the send URL, `token_uri` as the assertion's audience and the
/// place to post it).
package struct ServiceAccount: Sendable {
    package let projectID: String
    package let clientEmail: String
    /// `private_key_id`: the assertion's `kid` (nil when the file has none).
    package let privateKeyID: String?
    package let tokenURI: URL
    let privateKey: _RSA.Signing.PrivateKey

    /// The public half of the account's key (the simulator's token endpoint verifies assertions with it).
    package var publicKey: _RSA.Signing.PublicKey { privateKey.publicKey }

    /// The largest file read (a real one is about 2.3 kB).
    static let maximumFileSize = 64 * 1024

    /// Reads and checks the file: one error naming the field that is wrong.
    package init(file path: String) throws(ServiceAccountError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError(code: .unreadableFile, path: path, reason: "cannot read the file")
        }
        guard data.count <= Self.maximumFileSize else {
            throw ServiceAccountError(
                code: .notJSON,
                path: path,
                reason: "larger than \(Self.maximumFileSize / 1024) kB: not a service-account key file"
            )
        }
        try self.init(json: data, path: path)
    }

    /// Parses the file's bytes; `path` names it in errors.
    package init(json data: Data, path: String) throws(ServiceAccountError) {
        let json: JSON
        do {
            json = try JSON.parse(Array(data))
        } catch {
            throw ServiceAccountError(code: .notJSON, path: path, reason: "not JSON: \(error.reason)")
        }
        guard json.members != nil else {
            throw ServiceAccountError(code: .notJSON, path: path, reason: "not a JSON object")
        }
        func field(_ name: String) throws(ServiceAccountError) -> String {
            guard let value = json[name]?.stringValue, !value.isEmpty else {
                throw ServiceAccountError(code: .badField, path: path, reason: "no \"\(name)\" string")
            }
            return value
        }
        let type = try field("type")
        guard type == "service_account" else {
            throw ServiceAccountError(code: .badField, path: path, reason: "\"type\" is \"\(type)\", not \"service_account\"")
        }
        let project = try field("project_id")
        guard Self.isProjectID(project) else {
            throw ServiceAccountError(code: .badField, path: path, reason: "\"project_id\" is not a Firebase project id")
        }
        let email = try field("client_email")
        guard email.contains("@"), email.utf8.count <= 320, !email.contains(where: \.isWhitespace) else {
            throw ServiceAccountError(code: .badField, path: path, reason: "\"client_email\" is not an e-mail address")
        }
        let uri = try field("token_uri")
        guard let url = URL(string: uri), url.scheme == "https", url.host?.isEmpty == false else {
            throw ServiceAccountError(code: .badField, path: path, reason: "\"token_uri\" is not an https URL")
        }
        let pem = try field("private_key")
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw ServiceAccountError(
                code: .badPrivateKey,
                path: path,
                reason: "\"private_key\" is not an RSA private key of 2048 bits or more in PEM"
            )
        }
        self.projectID = project
        self.clientEmail = email
        self.privateKeyID = json["private_key_id"]?.stringValue
        self.tokenURI = url
        self.privateKey = key
    }

    /// A Google Cloud project id: 6 to 30 lower-case letters, digits and hyphens, starting with a letter, not ending
    /// with a hyphen.
    package static func isProjectID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (6...30).contains(bytes.count), let first = bytes.first, let last = bytes.last else { return false }
        return (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) && last != UInt8(ascii: "-")
            && bytes.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || $0 == UInt8(ascii: "-")
            }
    }
}
