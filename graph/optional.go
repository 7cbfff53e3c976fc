package graph

import (
	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/platform/problem"
)

// One rule for optional inputs, on every argument and input member: omitted
// and null mean "none"; an empty string is not a way to say none and is
// refused (code empty), as an empty enum value already is by GraphQL itself.
// The rule sits here, before the modules, whose inputs use "" for none.

// optionalMember is an optional string input and the REST name of it (a
// JSON pointer into the body, or a parameter name), which the presenter
// turns into the GraphQL argument path.
type optionalMember struct {
	pointer string
	value   *string
}

// noEmpty refuses every member of in that is present but empty.
func noEmpty(in ...optionalMember) error {
	var fields []problem.FieldError
	for _, m := range in {
		if m.value != nil && *m.value == "" {
			fields = append(fields, problem.FieldError{Pointer: m.pointer, Code: "empty", Detail: "omit it or send null for none"})
		}
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// messageOptionals lists the optional members of a message create at ptr.
func messageOptionals(ptr string, in *model.MessageCreate) []optionalMember {
	if in == nil {
		return nil
	}
	return []optionalMember{{ptr + "/reply_to_message_id", in.ReplyToMessageID}, {ptr + "/run_id", in.RunID}}
}

// inputErrors joins the refusals of one request's inputs into one
// validation error that lists every invalid member (a holder refused by
// runs.HolderFor beside the empty optional members); any other error is
// returned as it is.
func inputErrors(errs ...error) error {
	var fields []problem.FieldError
	for _, err := range errs {
		if err == nil {
			continue
		}
		p := problem.From("graph.inputErrors", err)
		if p == nil || p.Code != problem.ValidationFailed {
			return err
		}
		fields = append(fields, p.Fields...)
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}
