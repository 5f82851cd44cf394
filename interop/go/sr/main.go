// franz-go's schema registry client (pkg/sr) against Sluice's built-in registry: a client
// written by others than Confluent, with its own idea of the REST API.
//
// Usage: go run . REGISTRY_URL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
		os.Exit(1)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	return v
}

func record(fields string) string {
	return `{"type":"record","name":"Event","namespace":"franz","fields":[` + fields + `]}`
}

type event struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := must(sr.NewClient(sr.URLs(os.Args[1])))
	subject := fmt.Sprintf("franz-%d-value", time.Now().UnixNano())
	v1 := sr.Schema{Schema: record(`{"name":"id","type":"long"}`)}
	v2 := sr.Schema{Schema: record(`{"name":"id","type":"long"},{"name":"name","type":"string","default":""}`)}
	bad := sr.Schema{Schema: record(`{"name":"id","type":"long"},{"name":"size","type":"int"}`)}

	// CreateSchema registers, then finds the version through /schemas/ids/{id}/versions.
	s1 := must(cl.CreateSchema(ctx, subject, v1))
	check(s1.Version == 1 && s1.ID > 0 && s1.Subject == subject, "create: %+v", s1)
	again := must(cl.CreateSchema(ctx, subject, v1))
	check(again.ID == s1.ID && again.Version == 1, "create again: %+v", again)
	byID := must(cl.SchemaByID(ctx, s1.ID))
	check(byID.Type == sr.TypeAvro, "schema by id: %+v", byID)
	s2 := must(cl.CreateSchema(ctx, subject, v2))
	check(s2.Version == 2 && s2.ID != s1.ID, "v2: %+v", s2)
	check(slices.Equal(must(cl.SubjectVersions(ctx, subject)), []int{1, 2}), "versions")
	latest := must(cl.SchemaByVersion(ctx, subject, -1))
	check(latest.Version == 2 && latest.ID == s2.ID, "latest: %+v", latest)
	found := must(cl.LookupSchema(ctx, subject, v1))
	check(found.Version == 1 && found.ID == s1.ID, "lookup: %+v", found)
	usages := must(cl.SchemaVersionsByID(ctx, s1.ID))
	check(len(usages) == 1 && usages[0].Subject == subject, "versions by id: %+v", usages)

	// Compatibility: the check, then the refusal with a 409.
	compat := must(cl.CheckCompatibility(ctx, subject, -1, bad))
	check(!compat.Is, "an incompatible schema checked compatible")
	_, err := cl.CreateSchema(ctx, subject, bad)
	var re *sr.ResponseError
	check(errors.As(err, &re) && re.StatusCode == 409, "incompatible register: %v", err)

	// Per-subject level.
	for _, r := range cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, subject) {
		check(r.Err == nil && r.Level == sr.CompatFull, "set compatibility: %+v", r)
	}
	for _, r := range cl.Compatibility(ctx, subject) {
		check(r.Err == nil && r.Level == sr.CompatFull, "compatibility: %+v", r)
	}
	for _, r := range cl.Compatibility(ctx) {
		check(r.Err == nil && r.Level == sr.CompatBackward, "global compatibility: %+v", r)
	}

	// Serde: Confluent's framing (magic byte, id) around any encoding.
	var serde sr.Serde
	serde.Register(s1.ID, event{}, sr.EncodeFn(func(v any) ([]byte, error) { return json.Marshal(v) }),
		sr.DecodeFn(func(b []byte, v any) error { return json.Unmarshal(b, v) }))
	framed := must(serde.Encode(event{ID: 7, Name: "seven"}))
	check(framed[0] == 0, "magic byte")
	var back event
	check(serde.Decode(framed, &back) == nil && back.ID == 7 && back.Name == "seven", "serde: %+v", back)

	types := must(cl.SupportedTypes(ctx))
	check(slices.Contains(types, sr.TypeProtobuf) && slices.Contains(types, sr.TypeJSON), "types: %v", types)

	// Soft, then hard delete.
	deleted := must(cl.DeleteSubject(ctx, subject, sr.SoftDelete))
	check(slices.Equal(deleted, []int{1, 2}), "soft delete: %v", deleted)
	subjects := must(cl.Subjects(ctx))
	check(!slices.Contains(subjects, subject), "a soft-deleted subject is listed")
	_, err = cl.DeleteSubject(ctx, subject, sr.SoftDelete)
	check(errors.As(err, &re) && re.ErrorCode == 40404, "soft delete twice: %v", err)
	deleted = must(cl.DeleteSubject(ctx, subject, sr.HardDelete))
	check(slices.Equal(deleted, []int{1, 2}), "hard delete: %v", deleted)
	_, err = cl.SchemaByVersion(ctx, subject, 1)
	check(errors.As(err, &re) && re.ErrorCode == 40401, "after a hard delete: %v", err)

	fmt.Println("franz-go sr OK")
}
