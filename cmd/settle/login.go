package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// login is who the database says runs a command, and which of settle's
// roles it holds (docs/operations.md, "People and their roles"). The
// database refuses a reader's writes whatever the CLI does; the CLI
// refuses them first, with the grant that would allow them, and keeps
// operating (replay, period close, prune) from a login that only resolves.
type login struct {
	name     string
	super    bool // a superuser: every role
	writes   bool // may write settle's tables (settle_resolver, settle_operator, settle_app)
	resolver bool // a member of settle_resolver (every operator is)
	operator bool // a member of settle_operator
}

func whoIs(ctx context.Context, pool *pgxpool.Pool) (login, error) {
	var l login
	err := pool.QueryRow(ctx, `SELECT session_user, r.rolsuper, has_table_privilege('case_resolutions', 'INSERT'),
	       pg_has_role(session_user, 'settle_resolver', 'MEMBER'), pg_has_role(session_user, 'settle_operator', 'MEMBER')
	  FROM pg_roles r WHERE r.rolname = session_user`).Scan(&l.name, &l.super, &l.writes, &l.resolver, &l.operator)
	if err != nil {
		return l, fmt.Errorf("read who the database login is: %w", err)
	}
	return l, nil
}

// mayResolve refuses a login that cannot resolve cases.
func (l login) mayResolve() error {
	if !l.writes {
		return fmt.Errorf("database login %s reads only: resolving a case needs the role settle_resolver "+
			"(an administrator runs GRANT settle_resolver TO %s; see docs/operations.md)", l.name, l.name)
	}
	return nil
}

// mayOperate refuses a login that cannot do what, an operator's verb. A
// login that writes without being a person's (the service's own,
// settle_app) operates, as before people had roles.
func (l login) mayOperate(what string) error {
	switch {
	case !l.writes:
		return fmt.Errorf("database login %s reads only: %s needs the role settle_operator "+
			"(an administrator runs GRANT settle_operator TO %s; see docs/operations.md)", l.name, what, l.name)
	case l.resolver && !l.operator && !l.super:
		return fmt.Errorf("database login %s resolves cases but does not operate: %s needs the role settle_operator "+
			"(an administrator runs GRANT settle_operator TO %s; see docs/operations.md)", l.name, what, l.name)
	}
	return nil
}

// author is what a resolution or a period close records as its author:
// the login, with the name given by --as after it as a note. A name typed
// on the command line is never the author alone.
func (l login) author(as string) string {
	if as == "" || as == l.name {
		return l.name
	}
	return l.name + " (as " + as + ")"
}
