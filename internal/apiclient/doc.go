// Package apiclient is a Go client of the REST shim generated from
// docs/api/openapi.yaml by oapi-codegen (make generate). It exists to prove
// that the document drives the client generators existing clients use; a
// test drives the server through it.
package apiclient
