import APNs
import Testing

@testable import Push

/// A batch encoded on several threads at once (a browser's message costs an ECDH): every row once, in its order.
@Suite struct ParallelEncodingTests {
    @Test(arguments: [1, 2, 3, 7])
    func everyRowIsEncodedOnceInItsOrder(chunks: Int) {
        let rows = (1...101).map { QueuedNotification(messageID: Int64($0), deviceToken: "web_\($0)", payload: "{}") }
        let encoded = ParallelEncoding.map(rows, chunks: chunks) { row -> Encoding<Int64> in
            row.messageID % 10 == 0 ? .invalid("row \(row.messageID)") : .request(row.messageID)
        }
        #expect(encoded.count == rows.count)
        for (row, encoding) in zip(rows, encoded) {
            switch encoding {
            case .request(let id): #expect(id == row.messageID)
            case .invalid(let reason): #expect(reason == "row \(row.messageID)" && row.messageID % 10 == 0)
            case .notNow: Issue.record("row \(row.messageID) was not encoded")
            }
        }
    }
}
