package import Hummingbird

/// A refused command answers 400 with its reason in `X-Error-Description` and the body, as the tutorial's API did.
extension APIRequestError: HTTPResponseError {
    package var status: HTTPResponse.Status { .badRequest }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        APIController.error(status, description)
    }
}
